package tests

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDisruptionBudgets: the towers, the elastic workers and each task type of the TF cluster
// spec have a PodDisruptionBudget beside their StatefulSet, selecting exactly that StatefulSet's
// pods (no other controller's), labelled like every object, with the budget a run survives: no
// tower and no TF task (a rigid ring, a parameter-server cluster), elastic workers down to
// minNodes. Unready pods stay evictable, so that a broken pod never holds a drain.
func TestDisruptionBudgets(t *testing.T) {
	check := func(t *testing.T, rec *recorder, pdbName, stsName string, maxUnavailable int) {
		t.Helper()
		pdb := inputs(rec.one(t, tPDB, pdbName))
		sts := inputs(rec.one(t, tStatefulSet, stsName))
		sel, _ := get(pdb, "spec", "selector", "matchLabels").(map[string]any)
		if d := cmp.Diff(get(sts, "spec", "selector", "matchLabels"), any(sel)); d != "" {
			t.Errorf("PDB %s selector is not StatefulSet %s's (-sts +pdb):\n%s", pdbName, stsName, d)
		}
		var selected []string
		for _, p := range podTemplates(t, rec) {
			if selects(map[string]any{"spec": map[string]any{"selector": sel}}, map[string]any{"metadata": map[string]any{"labels": p.labels}}) {
				selected = append(selected, p.owner)
			}
		}
		sort.Strings(selected)
		if want := []string{tStatefulSet + " " + stsName}; !cmp.Equal(selected, want) {
			t.Errorf("PDB %s selects the pods of %v, want only %v", pdbName, selected, want)
		}
		if got := get(pdb, "spec", "maxUnavailable"); got != float64(maxUnavailable) {
			t.Errorf("PDB %s maxUnavailable = %v, want %d", pdbName, got, maxUnavailable)
		}
		if got := get(pdb, "spec", "unhealthyPodEvictionPolicy"); got != "AlwaysAllow" {
			t.Errorf("PDB %s unhealthyPodEvictionPolicy = %v, want AlwaysAllow", pdbName, got)
		}
		if got, want := fmt.Sprint(get(pdb, "metadata", "labels")), fmt.Sprint(get(sts, "metadata", "labels")); got != want {
			t.Errorf("PDB %s labels %s, want the StatefulSet's %s", pdbName, got, want)
		}
	}
	t.Run("towers", func(t *testing.T) {
		for i := range layouts {
			check(t, deploy(t, layoutRaw(t, i)), "towers", "towers", 0)
		}
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
