package stacks_test

import (
	"errors"
	"kolotoc/components/fabric"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"reflect"
	"strings"
	"testing"
)

// TestPoolFabricDefaults: what each committed cloud stack's pools get without saying it. GPU pools
// are compact and take their machine type's fabric; CPU pools spread and take none.
func TestPoolFabricDefaults(t *testing.T) {
	cases := []struct {
		path, stack, pool string
		want              stacks.PoolFabric
	}{
		// p4d.24xlarge: 4 EFA interfaces with GPUDirect RDMA (AWS, EFA "Supported instance
		// types"); a cluster placement group in the cluster's first zone.
		{"../examples/aws/Pulumi.aws.yaml", "aws", "gpu", stacks.PoolFabric{Cloud: stacks.CloudAWS, Compact: true, PlacementGroup: true, Zone: "us-east-1a", EFAs: 4, RDMA: true, HugePages: true}},
		{"../examples/aws/Pulumi.aws.yaml", "aws", "cpu", stacks.PoolFabric{Cloud: stacks.CloudAWS}},
		// a2-highgpu-8g: GKE's compact placement takes A100 machines (GKE, "Define compact
		// placement for GKE nodes", Limitations); gVNIC on GPU pools.
		{"../Pulumi.prod.yaml", "prod", "gpu", stacks.PoolFabric{Cloud: stacks.CloudGCP, Compact: true, PlacementGroup: true, Zone: "us-central1-a", GVNIC: true}},
		{"../Pulumi.prod.yaml", "prod", "cpu", stacks.PoolFabric{Cloud: stacks.CloudGCP}},
		// ND96asr_v4: a proximity placement group; its InfiniBand is not configured by Kolotoc.
		{"../examples/azure/Pulumi.azure.yaml", "azure", "gpu", stacks.PoolFabric{Cloud: stacks.CloudAzure, Compact: true, PlacementGroup: true, Zone: "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.stack+"/"+tc.pool, func(t *testing.T) {
			c, err := stacks.Load(exampleRaw(t, tc.path, tc.stack))
			if err != nil {
				t.Fatal(err)
			}
			p := c.Pool(tc.pool)
			if p == nil {
				t.Fatalf("no pool %s", tc.pool)
			}
			if got := c.PoolFabric(*p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PoolFabric = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPoolFabricRules: the rules PoolFabric follows for machine types and keys.
func TestPoolFabricRules(t *testing.T) {
	c := &stacks.Config{Cloud: stacks.CloudGCP, Cluster: stacks.Cluster{Zone: "us-central1-b"}}
	n1 := stacks.NodePool{Name: "t4", MachineType: "n1-standard-8", GPUsPerNode: 1, GPUType: stacks.GPUT4, Placement: stacks.PlacementCompact, Fabric: stacks.FabricAuto}
	// GKE's compact placement policy does not take N1 machines: the pool keeps to one zone, without it.
	if f := c.PoolFabric(n1); f.PlacementGroup || !f.Compact || f.Zone != "us-central1-b" || !f.GVNIC {
		t.Errorf("n1 + T4: %+v, want compact in us-central1-b without a placement policy, gVNIC", f)
	}
	aws := &stacks.Config{Cloud: stacks.CloudAWS, Cluster: stacks.Cluster{Zones: []string{"us-west-2a", "us-west-2b"}}}
	p5 := stacks.NodePool{Name: "h100", MachineType: "p5.48xlarge", GPUsPerNode: 8, Placement: stacks.PlacementCompact, Fabric: stacks.FabricAuto}
	if f := aws.PoolFabric(p5); f.EFAs != 32 || !f.RDMA || f.Zone != "us-west-2a" {
		t.Errorf("p5.48xlarge: %+v, want 32 EFAs with RDMA in us-west-2a", f)
	}
	p5.Fabric, p5.Zones = stacks.FabricOff, []string{"us-west-2b"}
	if f := aws.PoolFabric(p5); f.EFAs != 0 || f.FabricEnv() != nil || f.Zone != "us-west-2b" || !f.PlacementGroup {
		t.Errorf("p5.48xlarge, fabric off, zone b: %+v, want no EFA, compact in us-west-2b", f)
	}
	// A simulated stack mirrors the machine type's cloud: same interfaces, so the same pods fit.
	sim := &stacks.Config{Cloud: stacks.CloudSimulated}
	p4d := stacks.NodePool{Name: "gpu", MachineType: "p4d.24xlarge", GPUsPerNode: 8, Placement: stacks.PlacementCompact, Fabric: stacks.FabricAuto}
	if f := sim.PoolFabric(p4d); f.EFAs != 4 || f.Cloud != stacks.CloudAWS {
		t.Errorf("simulated p4d.24xlarge: %+v, want 4 EFAs as on aws", f)
	}
	if env := sim.PoolFabric(p4d).FabricEnv(); env["FI_PROVIDER"] != "efa" || env["FI_EFA_USE_DEVICE_RDMA"] != "1" {
		t.Errorf("NCCL environment on p4d: %v", env)
	}
	// A pool at zero is Karpenter's, which launches nodes only for resources its instance types
	// have, huge pages none of them (kubernetes-sigs/karpenter#751): its pods request none.
	atZero := stacks.NodePool{Name: "h100", MachineType: "p5.48xlarge", GPUsPerNode: 8, MinNodes: new(int), MaxNodes: 2, Placement: stacks.PlacementCompact, Fabric: stacks.FabricAuto}
	if f := aws.PoolFabric(atZero); f.EFAs != 32 || f.HugePages {
		t.Errorf("p5.48xlarge at zero: %+v, want 32 EFAs without huge pages", f)
	}
	// A pod's share of a node's huge pages follows its share of the GPUs, in whole 2 MiB pages,
	// from AWS's EKS EFA example's 5120Mi for a whole node (fabric.NodeHugePagesMi).
	for _, tc := range []struct {
		gpus int
		want string
	}{{8, "5120Mi"}, {4, "2560Mi"}, {1, "640Mi"}, {0, ""}} {
		if got := fabric.HugePages(tc.gpus, 8); got != tc.want {
			t.Errorf("HugePages(%d of 8) = %q, want %q", tc.gpus, got, tc.want)
		}
	}
	// A tower's share of a node's interfaces follows its share of the GPUs.
	f := stacks.PoolFabric{EFAs: 4}
	for _, tc := range []struct{ gpus, want int }{{8, 4}, {4, 2}, {1, 1}, {0, 0}} {
		if got := f.PerPod(tc.gpus, 8); got != tc.want {
			t.Errorf("PerPod(%d of 8) = %d, want %d", tc.gpus, got, tc.want)
		}
	}
}

// TestFabricRefused: placement and fabric keys that cannot hold are refused before anything is
// registered, each naming its key, the value and what is allowed.
func TestFabricRefused(t *testing.T) {
	const gcpPools = `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":2,"zones":["us-central1-a","us-central1-b"]%s},{"name":"cpu","machineType":"n2-standard-8","zones":["us-central1-a"]}]`
	spread := strings.Replace(gcpPools, "%s", `,"placement":"spread"`, 1)
	cases := []struct {
		name            string
		path, stack     string
		set             map[string]string
		wantKey, wantIn string
	}{
		{"compact pool over two zones", "../Pulumi.prod.yaml", "prod", map[string]string{"nodePools": strings.Replace(gcpPools, "%s", "", 1), "towers": `{"count":2,"pool":"gpu"}`},
			"nodePools[0].zones", "a compact pool runs in one zone; allowed: one zone, e.g. [us-central1-a], or nodePools[0].placement: spread"},
		{"ring spread over zones", "../Pulumi.prod.yaml", "prod", map[string]string{"nodePools": spread, "towers": `{"count":2,"pool":"gpu"}`},
			"nodePools[0].placement", "the towers' ring spans 2 nodes of pool gpu, which spreads over 2 zones"},
		{"ring spread over aws zones", "../examples/aws/Pulumi.aws.yaml", "aws", map[string]string{
			"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"placement":"spread"},{"name":"cpu","machineType":"m6i.4xlarge"}]`,
			"towers":    `{"count":2,"pool":"gpu","launcherPool":"cpu"}`},
			"nodePools[0].placement", "allowed: compact, or nodePools[0].fabric: off with towers.crossZone: true"},
		{"aws pool zone outside the cluster's", "../examples/aws/Pulumi.aws.yaml", "aws", map[string]string{
			"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"zones":["us-east-1c"]},{"name":"cpu","machineType":"m6i.4xlarge"}]`,
			"towers":    `{"count":2,"pool":"gpu","launcherPool":"cpu"}`},
			"nodePools[0].zones[0]", "allowed: us-east-1a, us-east-1b"},
		{"unknown placement", "../Pulumi.prod.yaml", "prod", map[string]string{"nodePools": strings.Replace(gcpPools, "%s", `,"placement":"near"`, 1)},
			"nodePools[0].placement", "allowed: compact, spread"},
		{"unknown fabric", "../Pulumi.prod.yaml", "prod", map[string]string{"nodePools": strings.Replace(gcpPools, "%s", `,"placement":"spread","fabric":"infiniband"`, 1)},
			"nodePools[0].fabric", "allowed: auto, off"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := exampleRaw(t, tc.path, tc.stack)
			for k, v := range tc.set {
				raw.Values["kolotoc:"+k] = v
			}
			_, err := stacks.Load(raw)
			var ce *stacks.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Load = %v, want a ConfigError", err)
			}
			for _, fe := range ce.Errors {
				if fe.Key == tc.wantKey && strings.Contains(fe.Msg, tc.wantIn) {
					return
				}
			}
			t.Errorf("no error on %s containing %q; got:\n%v", tc.wantKey, tc.wantIn, err)
		})
	}

	// Saying so lets the ring cross zones.
	raw := exampleRaw(t, "../Pulumi.prod.yaml", "prod")
	raw.Values["kolotoc:nodePools"] = spread
	raw.Values["kolotoc:towers"] = `{"count":2,"pool":"gpu","crossZone":true}`
	if _, err := stacks.Load(raw); err != nil {
		t.Errorf("a spread ring with towers.crossZone: %v", err)
	}
}
