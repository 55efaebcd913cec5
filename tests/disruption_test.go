package tests

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestDisruptionBudgets: the towers, the elastic workers and each task type of the TF cluster
// spec have a PodDisruptionBudget beside their StatefulSet, selecting exactly that StatefulSet's
// pods (no other controller's), labelled like every object, with the budget a run survives: one
// tower at a time when the ring restarts from its checkpoint (towers.maxRestarts > 0, the default),
// none without restarts (a rigid ring), no TF task (a parameter-server cluster), elastic workers
// down to minNodes. Unready pods stay evictable, so that a broken pod never holds a drain.
func TestDisruptionBudgets(t *testing.T) {
	check := func(t *testing.T, rec *recorder, pdbName, stsName string, maxUnavailable int) {
		t.Helper()
		pdb := decode[policyv1.PodDisruptionBudget](t, rec.one(t, tPDB, pdbName))
		sts := decode[appsv1.StatefulSet](t, rec.one(t, tStatefulSet, stsName))
		if pdb.Spec.Selector == nil || sts.Spec.Selector == nil {
			t.Fatalf("PDB %s selector %v, StatefulSet %s selector %v", pdbName, pdb.Spec.Selector, stsName, sts.Spec.Selector)
		}
		if d := cmp.Diff(sts.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels); d != "" {
			t.Errorf("PDB %s selector is not StatefulSet %s's (-sts +pdb):\n%s", pdbName, stsName, d)
		}
		var selected []string
		for _, p := range podTemplates(t, rec) {
			if selectorMatches(t, pdb.Spec.Selector, p.labels) {
				selected = append(selected, p.owner)
			}
		}
		sort.Strings(selected)
		if want := []string{tStatefulSet + " " + stsName}; !cmp.Equal(selected, want) {
			t.Errorf("PDB %s selects the pods of %v, want only %v", pdbName, selected, want)
		}
		if got := pdb.Spec.MaxUnavailable; got == nil || got.IntValue() != maxUnavailable || got.Type != intstr.Int {
			t.Errorf("PDB %s maxUnavailable = %v, want %d", pdbName, got, maxUnavailable)
		}
		if got := pdb.Spec.UnhealthyPodEvictionPolicy; got == nil || *got != policyv1.AlwaysAllow {
			t.Errorf("PDB %s unhealthyPodEvictionPolicy = %v, want AlwaysAllow", pdbName, got)
		}
		if d := cmp.Diff(sts.Labels, pdb.Labels); d != "" {
			t.Errorf("PDB %s labels are not the StatefulSet's (-sts +pdb):\n%s", pdbName, d)
		}
	}
	t.Run("towers", func(t *testing.T) {
		for i := range layouts {
			check(t, deploy(t, layoutRaw(t, i)), "towers", "towers", 1)
		}
	})
	t.Run("towers without restarts", func(t *testing.T) {
		raw := layoutRaw(t, 0)
		towers := map[string]any{}
		if s := raw.Values["kolotoc:towers"]; s != "" {
			if err := json.Unmarshal([]byte(s), &towers); err != nil {
				t.Fatal(err)
			}
		}
		towers["maxRestarts"] = 0
		b, _ := json.Marshal(towers)
		raw.Values["kolotoc:towers"] = string(b)
		check(t, deploy(t, raw), "towers", "towers", 0)
	})
	t.Run("elastic and tfcluster", func(t *testing.T) {
		rec := deploy(t, workloadsRaw(t, nil)) // elastic minNodes 1, nodes 2
		check(t, rec, "elastic", "elastic", 1)
		for _, typ := range []string{"ps", "worker", "chief"} {
			check(t, rec, "tfcluster-"+typ, "tfcluster-"+typ, 0)
		}
		for _, r := range rec.ofType(tPDB) {
			if r.Name == "tfcluster-evaluator" {
				t.Error("the TF evaluator has a PDB: it is outside the cluster spec and resumes from checkpoints")
			}
		}
	})
	t.Run("elastic at minNodes", func(t *testing.T) {
		rec := deploy(t, workloadsRaw(t, map[string]string{"elastic": `{"enabled":true,"minNodes":2,"maxNodes":3,"nodes":2}`}))
		check(t, rec, "elastic", "elastic", 0)
	})
}
