package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// nodePool is what a Karpenter NodePool holds, as Karpenter reads it (karpenter.sh/v1).
type nodePool struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				NodeClassRef map[string]string `json:"nodeClassRef"`
				Requirements []struct {
					Key      string   `json:"key"`
					Operator string   `json:"operator"`
					Values   []string `json:"values"`
				} `json:"requirements"`
				Taints      []Taint `json:"taints"`
				ExpireAfter string  `json:"expireAfter"`
			} `json:"spec"`
		} `json:"template"`
		Limits     map[string]string `json:"limits"`
		Disruption struct {
			ConsolidationPolicy string              `json:"consolidationPolicy"`
			ConsolidateAfter    string              `json:"consolidateAfter"`
			Budgets             []map[string]string `json:"budgets"`
		} `json:"disruption"`
	} `json:"spec"`
}

// TestAutoscaledPool: a simulated pool at zero is a Karpenter NodePool and its KWOKNodeClass, no
// SimulatedNodePool: nodes of the pool's one machine type, capacity type and zone, with the labels
// and taints a fixed pool's nodes carry, at most maxNodes of them (and their GPUs), given back
// scaleDownAfter after they empty, never expired under a running rank
// (https://karpenter.sh/docs/concepts/nodepools/, .../disruption/).
func TestAutoscaledPool(t *testing.T) {
	pools := []Pool{
		{Name: "gpu", MachineType: "a2-highgpu-8g", GPUsPerNode: 8, GPUType: "nvidia-tesla-a100", CPUs: 96, Memory: "680Gi",
			Zone: "us-central1-b", Autoscaled: true, MaxNodes: 3, Spot: true, ScaleDownAfter: "90s",
			Taints: []Taint{{Key: "team", Value: "vision", Effect: "NoSchedule"}}},
		{Name: "cpu", Nodes: 1, CPUs: 16, Memory: "64Gi"},
	}
	var nodeNames pulumi.StringArrayOutput
	rec := rendertest.Run(t, func(ctx *pulumi.Context) error {
		c, err := NewSimulated(ctx, "cluster", &SimulatedArgs{Name: "sim", Pools: pools, Labels: meta.Labels{Instance: "dev", Version: "test"}})
		if err != nil {
			return err
		}
		nodeNames = c.NodeNames
		return nil
	})
	if fixed := rec.OfType(PoolType); len(fixed) != 1 || fixed[0].Name != "cluster-cpu" {
		t.Errorf("SimulatedNodePools %v: want only the fixed pool's", fixed)
	}
	if d := cmp.Diff([]string{"sim-cpu-0"}, rendertest.Value[[]string](t, nodeNames)); d != "" {
		t.Errorf("node names (-want +got): the autoscaled pool has no node of its own to name\n%s", d)
	}
	classes := rec.OfType(KWOKNodeClassType)
	if len(classes) != 1 || classes[0].Parent != "cluster" {
		t.Fatalf("KWOKNodeClasses %v: want one, under the component", classes)
	}
	nps := rec.OfType(NodePoolType)
	if len(nps) != 1 {
		t.Fatalf("%d NodePools, want one", len(nps))
	}
	np := rendertest.Decode[nodePool](t, nps[0])
	if np.APIVersion != "karpenter.sh/v1" || np.Kind != "NodePool" || np.Metadata.Name != "sim-gpu" {
		t.Errorf("%s %s %s: want karpenter.sh/v1 NodePool sim-gpu", np.APIVersion, np.Kind, np.Metadata.Name)
	}
	if np.Metadata.Annotations["pulumi.com/waitFor"] != "condition=Ready" {
		t.Errorf("waitFor %q: the stack's pods would wait on a pool no autoscaler has taken", np.Metadata.Annotations["pulumi.com/waitFor"])
	}
	s := np.Spec.Template.Spec
	if d := cmp.Diff(map[string]string{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "sim-gpu"}, s.NodeClassRef); d != "" {
		t.Errorf("nodeClassRef (-want +got):\n%s", d)
	}
	req := map[string]string{}
	for _, r := range s.Requirements {
		if r.Operator != "In" || len(r.Values) != 1 {
			t.Errorf("requirement %+v: want In one value", r)
		}
		req[r.Key] = r.Values[0]
	}
	if d := cmp.Diff(map[string]string{"node.kubernetes.io/instance-type": "a2-highgpu-8g", "karpenter.sh/capacity-type": "spot",
		"topology.kubernetes.io/zone": "us-central1-b"}, req); d != "" {
		t.Errorf("requirements (-want +got):\n%s", d)
	}
	labels := np.Spec.Template.Metadata.Labels
	for k, v := range map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "nvidia-tesla-a100",
		"kolotoc.dev/pool": "gpu", "kolotoc.dev/cluster": "sim", "type": "kwok"} {
		if labels[k] != v {
			t.Errorf("node label %s=%q, want %q", k, labels[k], v)
		}
	}
	for _, k := range []string{"node.kubernetes.io/instance-type", "topology.kubernetes.io/zone", "app.kubernetes.io/version"} {
		if _, ok := labels[k]; ok {
			t.Errorf("template label %s: Karpenter sets it from the instance type and offering (or it would re-make nodes on upgrade)", k)
		}
	}
	want := []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}, {Key: "team", Value: "vision", Effect: "NoSchedule"}}
	if d := cmp.Diff(want, s.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if s.ExpireAfter != "Never" {
		t.Errorf("expireAfter %q: Karpenter's expiry ignores do-not-disrupt and would take a running rank's node", s.ExpireAfter)
	}
	if d := cmp.Diff(map[string]string{"nodes": "3", "nvidia.com/gpu": "24"}, np.Spec.Limits); d != "" {
		t.Errorf("limits (-want +got):\n%s", d)
	}
	dis := np.Spec.Disruption
	if dis.ConsolidationPolicy != "WhenEmpty" || dis.ConsolidateAfter != "90s" || len(dis.Budgets) != 1 || dis.Budgets[0]["nodes"] != "100%" {
		t.Errorf("disruption %+v: want WhenEmpty after 90s, every empty node at once", dis)
	}
}

// TestKeepNode: a training pod on an autoscaled pool carries both autoscalers' annotations; on a
// fixed pool its annotations stay as they were (nil stays nil: no template change on upgrade).
func TestKeepNode(t *testing.T) {
	l := meta.Labels{AutoscaledPools: map[string]bool{"gpu": true}}
	if got := l.KeepNode("cpu", nil); got != nil {
		t.Errorf("fixed pool: %v, want nil", got)
	}
	got := l.KeepNode("gpu", map[string]string{"a": "b"})
	if d := cmp.Diff(map[string]string{"a": "b", "karpenter.sh/do-not-disrupt": "true", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, got); d != "" {
		t.Errorf("autoscaled pool (-want +got):\n%s", d)
	}
}
