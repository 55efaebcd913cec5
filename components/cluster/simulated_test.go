package cluster

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// pool is what a SimulatedNodePool holds, as the pool controller (testbed/cluster/simpool) reads it.
type pool struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Nodes    int `json:"nodes"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Taints []Taint `json:"taints"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

var testPools = []Pool{
	{Name: "gpu", Nodes: 2, MachineType: "a2-highgpu-8g", GPUsPerNode: 8, GPUType: "nvidia-tesla-a100", CPUs: 96, Memory: "680Gi",
		Zone: "europe-west4-a", Devices: map[string]string{"rdma/hca": "1"},
		Taints: []Taint{{Key: "kolotoc.dev/spot", Value: "true", Effect: "NoSchedule"}}},
	{Name: "cpu", Nodes: 3, CPUs: 16, Memory: "64Gi", Labels: map[string]string{"team": "data"}},
}

func renderPools(t *testing.T) (map[string]pool, []string) {
	t.Helper()
	var nodeNames pulumi.StringArrayOutput
	rec := rendertest.Run(t, func(ctx *pulumi.Context) error {
		c, err := NewSimulated(ctx, "cluster", &SimulatedArgs{Name: "sim", Pools: testPools, Labels: meta.Labels{Instance: "dev", Version: "test"}})
		if err != nil {
			return err
		}
		nodeNames = c.NodeNames
		return nil
	})
	got := map[string]pool{}
	for _, r := range rec.OfType(PoolType) {
		if r.Parent != "cluster" {
			t.Errorf("%s: parent %q, want the component", r.Name, r.Parent)
		}
		got[r.Name] = rendertest.Decode[pool](t, r)
	}
	if len(got) != len(testPools) {
		t.Fatalf("%d SimulatedNodePools, want one per pool (%d)", len(got), len(testPools))
	}
	return got, rendertest.Value[[]string](t, nodeNames)
}

// TestGPUPool: a GPU pool's nodes carry what a cloud's GPU nodes carry: the GPU labels the
// device plugin and the workloads select on, the GPU taint first, the GPUs and devices in their
// capacity; the pool is waited for until Ready.
func TestGPUPool(t *testing.T) {
	pools, _ := renderPools(t)
	p, ok := pools["cluster-gpu"]
	if !ok {
		t.Fatalf("no pool cluster-gpu among %v", pools)
	}
	if p.APIVersion != "kolotoc.dev/v1alpha1" || p.Kind != "SimulatedNodePool" {
		t.Errorf("%s %s: want the pool controller's kolotoc.dev/v1alpha1 SimulatedNodePool", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "sim-gpu" || p.Spec.Nodes != 2 {
		t.Errorf("pool %s with %d nodes, want sim-gpu with 2", p.Metadata.Name, p.Spec.Nodes)
	}
	if got := p.Metadata.Annotations["pulumi.com/waitFor"]; got != "condition=Ready" {
		t.Errorf("waitFor %q: pods would be placed before the nodes exist", got)
	}
	labels := p.Spec.Template.Metadata.Labels
	for k, v := range map[string]string{
		"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "nvidia-tesla-a100", "kolotoc.dev/pool": "gpu",
		"kolotoc.dev/cluster": "sim", "topology.kubernetes.io/zone": "europe-west4-a",
		"node.kubernetes.io/instance-type": "a2-highgpu-8g", "type": "kwok",
	} {
		if labels[k] != v {
			t.Errorf("node label %s=%q, want %q", k, labels[k], v)
		}
	}
	want := []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}, {Key: "kolotoc.dev/spot", Value: "true", Effect: "NoSchedule"}}
	if d := cmp.Diff(want, p.Spec.Template.Spec.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	var capacity map[string]string
	if err := json.Unmarshal([]byte(p.Spec.Template.Metadata.Annotations["kolotoc.dev/simulated-capacity"]), &capacity); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"cpu": "96", "memory": "680Gi", "pods": "110", "nvidia.com/gpu": "8", "rdma/hca": "1"}, capacity); d != "" {
		t.Errorf("capacity (-want +got):\n%s", d)
	}
	if p.Spec.Template.Metadata.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Error("the nodes are not handed to kwok: they would never be Ready")
	}
	if _, ok := labels["app.kubernetes.io/version"]; ok {
		t.Error("the node template carries the version: an upgrade would re-make every node")
	}
}

// TestCPUPool: a CPU pool has neither GPU labels nor taints, so GPU agents stay off it and any
// pod may land on it; its extra labels reach the nodes.
func TestCPUPool(t *testing.T) {
	pools, _ := renderPools(t)
	p := pools["cluster-cpu"]
	labels := p.Spec.Template.Metadata.Labels
	for _, k := range []string{"nvidia.com/gpu.present", "nvidia.com/gpu.product", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"} {
		if v, ok := labels[k]; ok {
			t.Errorf("CPU node label %s=%q", k, v)
		}
	}
	if labels["team"] != "data" || labels["kolotoc.dev/pool"] != "cpu" {
		t.Errorf("labels %v: want the pool's own and team=data", labels)
	}
	if len(p.Spec.Template.Spec.Taints) != 0 {
		t.Errorf("CPU pool taints %v", p.Spec.Template.Spec.Taints)
	}
	if p.Spec.Nodes != 3 {
		t.Errorf("%d nodes, want 3", p.Spec.Nodes)
	}
}

// TestNodeNames: the output lists every node, in pool order, as the controller names them.
func TestNodeNames(t *testing.T) {
	_, names := renderPools(t)
	want := []string{"sim-gpu-0", "sim-gpu-1", "sim-cpu-0", "sim-cpu-1", "sim-cpu-2"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("node names (-want +got):\n%s", d)
	}
}
