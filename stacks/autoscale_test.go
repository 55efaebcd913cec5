package stacks_test

import (
	"errors"
	"kolotoc/stacks"
	"os"
	"strings"
	"testing"
)

// loadWith loads the stack file at path with its secrets set and the given kolotoc: values
// replaced (JSON, as `pulumi config set --path` would store them).
func loadWith(t *testing.T, path, stack string, set map[string]string) (*stacks.Config, error) {
	t.Helper()
	raw := exampleRaw(t, path, stack)
	for k, v := range set {
		raw.Values["kolotoc:"+k] = v
	}
	return stacks.Load(raw)
}

// TestPoolAtZero: minNodes: 0 is a pool at zero now (it meant "the same as nodes" before): no
// node at first, autoscaled up to maxNodes, nodes given back after the default ten minutes.
func TestPoolAtZero(t *testing.T) {
	c, err := loadWith(t, "../examples/gpu-dev/Pulumi.gpu-dev.yaml", "dev", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":2},{"name":"cpu","machineType":"n2-standard-16"}]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pool("gpu")
	if p.Min() != 0 || p.Nodes != 0 || p.MaxNodes != 2 || !p.Autoscaled() || p.ScaleDownAfter != "10m" {
		t.Errorf("pool at zero: min %d, nodes %d, max %d, autoscaled %v, scaleDownAfter %q; want 0, 0, 2, true, 10m",
			p.Min(), p.Nodes, p.MaxNodes, p.Autoscaled(), p.ScaleDownAfter)
	}
	sim := c.SimulatedPool(*p)
	if !sim.Autoscaled || sim.MaxNodes != 2 || sim.ScaleDownAfter != "10m" || sim.GPUsPerNode != 8 {
		t.Errorf("its simulated form %+v: want autoscaled up to 2 nodes of 8 GPUs, scaled down after 10m", sim)
	}
	// A simulated pool that autoscales above zero (a cloud stack's mirror) keeps its nodes, as before.
	c2, err := loadWith(t, "../examples/gpu-dev/Pulumi.gpu-dev.yaml", "dev", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":1,"minNodes":1,"maxNodes":2},{"name":"cpu","machineType":"n2-standard-16"}]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sim := c2.SimulatedPool(*c2.Pool("gpu")); sim.Autoscaled || sim.Nodes != 1 {
		t.Errorf("simulated pool autoscaled from 1 to 2: %+v, want its 1 node fixed (a SimulatedNodePool)", sim)
	}
	// A pool without minNodes stays fixed, as before.
	if q := c.Pool("cpu"); q.Min() != 1 || q.Nodes != 1 || q.MaxNodes != 1 || q.Autoscaled() || q.ScaleDownAfter != "" {
		t.Errorf("pool without minNodes: min %d, nodes %d, max %d, autoscaled %v, scaleDownAfter %q; want a fixed pool of 1",
			q.Min(), q.Nodes, q.MaxNodes, q.Autoscaled(), q.ScaleDownAfter)
	}
	// The quota the stack's queue derives counts the pool at its maximum.
	if q := c.QueueQuota()["nvidia.com/gpu"]; q != "16" {
		t.Errorf("queue quota of a pool at zero with maxNodes 2 × 8 GPUs: %q, want 16", q)
	}
}

// TestPoolSizeRefusals: what a stack's cloud cannot do with an autoscaled pool is refused with
// its key, before anything is registered. Each failed on the old code, which read minNodes: 0 as
// "the same as nodes" and knew no scaleDownAfter.
func TestPoolSizeRefusals(t *testing.T) {
	const gpuDev = "../examples/gpu-dev/Pulumi.gpu-dev.yaml"
	cpu := `{"name":"cpu","machineType":"n2-standard-16"}`
	cases := []struct {
		name, path, stack string
		set               map[string]string
		key, msg          string
	}{
		{"old minNodes: 0 without maxNodes", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":2,"minNodes":0},` + cpu + `]`},
			"nodePools[0].maxNodes", `needs the most nodes its autoscaler may add; allowed: 1 or more. (Before this release minNodes: 0 meant "the same as nodes"`},
		{"simulated pool at zero without a catalogued type", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"nvidia-tesla-a100","minNodes":0,"maxNodes":2},` + cpu + `]`},
			"nodePools[0].machineType", "allowed: one of them, e.g. a2-highgpu-8g"},
		{"simulated pool at zero with attached GPUs", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"n1-standard-8","gpusPerNode":1,"gpuType":"nvidia-tesla-t4","minNodes":0,"maxNodes":2},` + cpu + `]`},
			"nodePools[0].machineType", "have 0 GPUs, 8 CPUs and 30Gi; the pool says 1, 8 and 30Gi"},
		{"simulated pool at zero starting with nodes", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":1,"minNodes":0,"maxNodes":2},` + cpu + `]`},
			"nodePools[0].nodes", "allowed: 0 (unset) with minNodes: 0"},
		{"simulated pool at zero with other figures", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","cpus":8,"minNodes":0,"maxNodes":2},` + cpu + `]`},
			"nodePools[0].machineType", "have 8 GPUs, 96 CPUs and 680Gi; the pool says 8, 8 and 680Gi"},
		{"simulated pool at zero in a zone Karpenter does not offer", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["asia-east1-a"],"minNodes":0,"maxNodes":2},` + cpu + `]`},
			"nodePools[0].zones", "allowed: us-central1-a, us-central1-b, us-central1-c, us-central1-f"},
		{"simulated pool at zero with devices", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","devices":{"rdma/hca":1},"minNodes":0,"maxNodes":2},` + cpu + `]`},
			"nodePools[0].devices", "only their machine type's resources"},
		{"scaleDownAfter on a fixed pool", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","scaleDownAfter":"5m"},` + cpu + `]`},
			"nodePools[0].scaleDownAfter", "only an autoscaled pool gives nodes back"},
		{"scaleDownAfter not a duration", gpuDev, "dev", map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":2,"scaleDownAfter":"ten minutes"},` + cpu + `]`},
			"nodePools[0].scaleDownAfter", "e.g. 30s, 10m, 1h30m"},
		// On aws a pool at zero is Karpenter's (tests/autoscale_eks_test.go has the others).
		{"aws pool at zero with devices", "../examples/aws/Pulumi.aws.yaml", "aws", map[string]string{"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","minNodes":0,"maxNodes":2,"devices":{"rdma/hca":1}},` +
			`{"name":"cpu","machineType":"m6i.4xlarge"},{"name":"ops","machineType":"m6i.large"}]`},
			"nodePools[0].devices", "launches a node only for resources its instance type has"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(t, tc.path, tc.stack, tc.set)
			var ce *stacks.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("load: %v, want configuration problems", err)
			}
			for _, e := range ce.Errors {
				if e.Key == tc.key && strings.Contains(e.Error(), tc.msg) {
					return
				}
			}
			t.Errorf("no error on kolotoc:%s containing %q; got:\n%v", tc.key, tc.msg, err)
		})
	}
}

// TestKarpenterInstanceTypes: the instance-types file the local cluster's Karpenter reads
// (testbed/cluster/karpenter/instance-types.json) is the catalogue's: regenerated with
// UPDATE_GOLDEN=1 when the catalogue changes, and never edited by hand.
func TestKarpenterInstanceTypes(t *testing.T) {
	const path = "../testbed/cluster/karpenter/instance-types.json"
	want, err := stacks.KarpenterInstanceTypes()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the catalogue's instance types: run UPDATE_GOLDEN=1 go test ./stacks -run TestKarpenterInstanceTypes", path)
	}
	for _, name := range []string{`"name":"a2-highgpu-8g"`, `"name":"p4d.24xlarge"`, `"vpc.amazonaws.com/efa":"4"`, `"nvidia.com/gpu":"8"`} {
		if !strings.Contains(string(want), name) {
			t.Errorf("instance types lack %s", name)
		}
	}
	if !strings.Contains(string(want), `"name":"n1-standard-8"`) {
		t.Errorf("n1-standard-8 is missing: a machine type whose GPUs are attached is offered as its plain CPU machine")
	}
}

// TestQueuedProvisioningRefusals: queue.provisioning: queued is GKE's queued provisioning through
// Kueue: anywhere else, without the queue, on a GPU pool that does not sit at zero or whose
// driver GKE does not install, it is refused with its key before anything is registered
// (GKE's guide creates the pool with --enable-autoscaling --num-nodes=0 --total-max-nodes and
// --accelerator ...,gpu-driver-version=...:
// https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest). The old code knew
// no such key and failed every case.
func TestQueuedProvisioningRefusals(t *testing.T) {
	const (
		prod   = "../Pulumi.prod.yaml"
		gpuDev = "../examples/gpu-dev/Pulumi.gpu-dev.yaml"
		aws    = "../examples/aws/Pulumi.aws.yaml"
		queued = `{"type":"kueue","provisioning":"queued"}`
	)
	gcpAtZero := `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["us-central1-a"],"minNodes":0,"maxNodes":2},{"name":"cpu","machineType":"n2-standard-32","zones":["us-central1-a"]}]`
	cases := []struct {
		name, path, stack string
		set               map[string]string
		key, msg          string
	}{
		{"aws", aws, "aws", map[string]string{"queue": queued, "nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":1},{"name":"cpu","machineType":"m6i.4xlarge"}]`},
			"queue.provisioning", "cloud aws has no queued provisioning of nodes; allowed: standard, or cloud gcp"},
		{"simulated", gpuDev, "dev", map[string]string{"queue": queued},
			"queue.provisioning", "cloud simulated has no queued provisioning of nodes; allowed: standard, or cloud gcp"},
		{"no queue", prod, "prod", map[string]string{"queue": `{"provisioning":"queued"}`, "nodePools": gcpAtZero},
			"queue.provisioning", "needs the queue; allowed: unset, or queue.type kueue"},
		{"queue off", prod, "prod", map[string]string{"queue": `{"type":"off","maxRunDuration":"24h"}`},
			"queue.maxRunDuration", "needs the queue; allowed: unset, or queue.type kueue"},
		{"not a provisioning", prod, "prod", map[string]string{"queue": `{"type":"kueue","provisioning":"dws"}`},
			"queue.provisioning", "allowed: standard, queued"},
		{"maxRunDuration with standard", prod, "prod", map[string]string{"queue": `{"type":"kueue","maxRunDuration":"24h"}`},
			"queue.maxRunDuration", "only queued nodes have a run duration"},
		{"maxRunDuration over seven days", prod, "prod", map[string]string{"queue": `{"type":"kueue","provisioning":"queued","maxRunDuration":"192h"}`, "nodePools": gcpAtZero},
			"queue.maxRunDuration", "at most 168h (GKE's seven days)"},
		{"maxRunDuration not a duration", prod, "prod", map[string]string{"queue": `{"type":"kueue","provisioning":"queued","maxRunDuration":"a day"}`, "nodePools": gcpAtZero},
			"queue.maxRunDuration", "a duration in whole seconds"},
		{"an existing ClusterQueue", prod, "prod", map[string]string{"queue": `{"type":"kueue","provisioning":"queued","clusterQueue":"shared"}`, "nodePools": gcpAtZero},
			"queue.provisioning", "goes on the stack's own ClusterQueue, not on shared"},
		{"GPU pool not at zero", prod, "prod", map[string]string{"queue": queued},
			"nodePools[0].minNodes", "the pool sits at zero; allowed: 0, with maxNodes"},
		{"GPU pool at zero starting with nodes", prod, "prod", map[string]string{"queue": queued,
			"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["us-central1-a"],"nodes":1,"minNodes":0,"maxNodes":2},{"name":"cpu","machineType":"n2-standard-32","zones":["us-central1-a"]}]`},
			"nodePools[0].nodes", "the pool starts with none; allowed: 0 (unset)"},
		{"driver not installed", prod, "prod", map[string]string{"queue": queued,
			"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["us-central1-a"],"minNodes":0,"maxNodes":2,"gpuDriver":"INSTALLATION_DISABLED"},{"name":"cpu","machineType":"n2-standard-32","zones":["us-central1-a"]}]`},
			"nodePools[0].gpuDriver", "allowed: DEFAULT, LATEST"},
		{"no GPU pool", prod, "prod", map[string]string{"queue": queued, "nodePools": `[{"name":"cpu","machineType":"n2-standard-32","zones":["us-central1-a"]}]`,
			"towers": `{"count":2,"gpusPerTower":0,"pool":"cpu"}`},
			"queue.provisioning", "the stack has no GPU pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(t, tc.path, tc.stack, tc.set)
			var ce *stacks.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("load: %v, want configuration problems", err)
			}
			for _, e := range ce.Errors {
				if e.Key == tc.key && strings.Contains(e.Error(), tc.msg) {
					return
				}
			}
			t.Errorf("no error on kolotoc:%s containing %q; got:\n%v", tc.key, tc.msg, err)
		})
	}
}

// TestQueuedProvisioningLoads: a gcp stack whose GPU pool sits at zero takes queued provisioning;
// its GPU pool is queued, its CPU pool is not, and maxRunDuration defaults to GKE's seven days.
func TestQueuedProvisioningLoads(t *testing.T) {
	c, err := loadWith(t, "../Pulumi.prod.yaml", "prod", map[string]string{
		"queue":     `{"type":"kueue","provisioning":"queued"}`,
		"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","zones":["us-central1-a"],"minNodes":0,"maxNodes":8},{"name":"cpu","machineType":"n2-standard-32","zones":["us-central1-a"]}]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.QueuedPool(c.NodePools[0]) || c.QueuedPool(c.NodePools[1]) || c.Queue.MaxRunDuration != "168h" {
		t.Errorf("queued: gpu %v, cpu %v, maxRunDuration %q; want true, false, 168h",
			c.QueuedPool(c.NodePools[0]), c.QueuedPool(c.NodePools[1]), c.Queue.MaxRunDuration)
	}
	// Every kueue stack is standard unless it says queued, and no pool of it is queued.
	std, err := loadWith(t, "../Pulumi.prod.yaml", "prod", map[string]string{"queue": `{"type":"kueue"}`})
	if err != nil {
		t.Fatal(err)
	}
	if std.Queue.Provisioning != "standard" || std.QueuedPool(std.NodePools[0]) || std.Queue.MaxRunDuration != "" {
		t.Errorf("standard: provisioning %q, gpu queued %v, maxRunDuration %q", std.Queue.Provisioning, std.QueuedPool(std.NodePools[0]), std.Queue.MaxRunDuration)
	}
}
