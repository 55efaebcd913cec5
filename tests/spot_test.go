package tests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/stacks"
)

// notOnSpot is the launcher's required node affinity: off every cloud's spot nodes.
var notOnSpot = []corev1.NodeSelectorRequirement{
	{Key: "cloud.google.com/gke-spot", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}},
	{Key: "eks.amazonaws.com/capacityType", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"SPOT"}},
	{Key: "kubernetes.azure.com/scalesetpriority", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot"}},
}

func launcherSpec(t *testing.T, rec *recorder) corev1.PodSpec {
	t.Helper()
	return templateOf(t, rec.one(t, tJob, "towers-launcher")).Spec
}

// TestLauncherNotOnSpot: the launcher, the run's one coordinator, never lands on spot capacity,
// on any cloud: it requires nodes without GKE's, EKS's or AKS's spot label. On the AWS example,
// whose Dask pool is Spot, it runs on the on-demand pool towers.launcherPool names; mirrored on
// the simulated cloud, the Spot pool's nodes carry EKS's spot label as EKS sets it, and the cloud
// node groups do not declare it (EKS sets it and reserves its prefix).
func TestLauncherNotOnSpot(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			aff := launcherSpec(t, deploy(t, layoutRaw(t, i))).Affinity
			if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
				t.Fatalf("launcher affinity %+v: no required node affinity", aff)
			}
			terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if d := cmp.Diff([]corev1.NodeSelectorTerm{{MatchExpressions: notOnSpot}}, terms); d != "" {
				t.Errorf("launcher node affinity (-want +got):\n%s", d)
			}
		})
	}
	t.Run("aws", func(t *testing.T) {
		rec := deploy(t, cloudRaw(t, "aws", nil))
		spec := launcherSpec(t, rec)
		if got := spec.NodeSelector["kolotoc.dev/pool"]; got != "ops" {
			t.Errorf("launcher on pool %v, want the on-demand pool ops", got)
		}
		for _, name := range []string{"cluster-cpu", "cluster-ops"} {
			ng := inputs(rec.one(t, "aws:eks/nodeGroup:NodeGroup", name))
			if _, set := get(ng, "labels").(map[string]any)["eks.amazonaws.com/capacityType"]; set {
				t.Errorf("node group %s declares EKS's reserved label eks.amazonaws.com/capacityType", name)
			}
		}
		if got := get(inputs(rec.one(t, "aws:eks/nodeGroup:NodeGroup", "cluster-cpu")), "capacityType"); got != "SPOT" {
			t.Errorf("the example's cpu pool capacityType = %v, want SPOT", got)
		}
	})
	t.Run("aws simulated", func(t *testing.T) {
		rec := deploy(t, mirroredRaw(t, "aws", nil))
		spot := map[string]string{}
		for _, n := range rec.simulatedNodes() {
			labels := decode[corev1.Node](t, n).Labels
			spot[labels["kolotoc.dev/pool"]] = labels["eks.amazonaws.com/capacityType"]
		}
		if want := map[string]string{"gpu": "", "cpu": "SPOT", "ops": ""}; !cmp.Equal(spot, want) {
			t.Errorf("simulated nodes' eks.amazonaws.com/capacityType by pool = %v, want %v", spot, want)
		}
		if got := launcherSpec(t, rec).NodeSelector["kolotoc.dev/pool"]; got != "ops" {
			t.Errorf("launcher on pool %v, want ops", got)
		}
	})
	t.Run("a spot pool under the launcher is refused", func(t *testing.T) {
		raw := cloudRaw(t, "aws", map[string]string{"towers": `{"count":2,"gpusPerTower":8,"pool":"gpu","launcherPool":"cpu"}`})
		_, err := stacks.Load(raw)
		if err == nil || !strings.Contains(err.Error(), `kolotoc:towers.launcherPool = cpu: pool "cpu" is spot capacity`) {
			t.Errorf("launcher on the Spot pool: %v", err)
		}
	})
}
