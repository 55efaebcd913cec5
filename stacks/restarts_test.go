package stacks_test

import (
	"encoding/json"
	"strings"
	"testing"

	"kolotoc/stacks"
)

// withPools rewrites a stack's node pools: change gets each pool (decoded) by name.
func withPools(t *testing.T, raw stacks.Raw, change func(name string, p map[string]any)) stacks.Raw {
	t.Helper()
	var pools []map[string]any
	if err := json.Unmarshal([]byte(raw.Values["kolotoc:nodePools"]), &pools); err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		change(p["name"].(string), p)
	}
	b, _ := json.Marshal(pools)
	raw.Values["kolotoc:nodePools"] = string(b)
	return raw
}

// TestSpotNotices: each cloud entry's Spot notice as its documentation says it.
//   - GCP: after the preemption notice, Compute Engine sends the VM an ACPI G2 soft off, and GKE
//     gives the node's Pods a 30-second graceful termination by default, the first 15 s to regular
//     Pods, the next 15 s to critical system Pods (GKE "Spot VMs", terminating and gracefully
//     shutting down Spot VMs, docs.cloud.google.com/kubernetes-engine/docs/concepts/spot-vms).
//   - AWS: "A Spot Instance interruption notice is a warning that is issued two minutes before
//     Amazon EC2 stops or terminates your Spot Instance" (EC2 User Guide, "Spot Instance
//     interruption notices").
//   - Azure: Scheduled Events schedule a Preempt event (a Spot eviction) a minimum of 30 seconds
//     ahead (Azure "Scheduled Events for Linux VMs", event scheduling: "| Preempt | 30 seconds |").
//   - existing and simulated: none known.
func TestSpotNotices(t *testing.T) {
	for cloud, want := range map[string]int{"gcp": 30, "aws": 120, "azure": 30, "existing": 0, "simulated": 0} {
		n := (&stacks.Config{Cloud: cloud}).CloudEntry().SpotNotice
		switch {
		case want == 0 && n != nil:
			t.Errorf("%s: notice %+v, want none", cloud, *n)
		case want != 0 && (n == nil || n.Seconds != want || n.Doc == "" || n.What == ""):
			t.Errorf("%s: notice %+v, want %d s with its name and document", cloud, n, want)
		}
	}
}

// TestGraceWithinSpotNotice: a training pod's grace period on a Spot pool is cut short when the
// cloud reclaims the node, so a longer one is refused, keyed, and the default is the notice when
// that is shorter. The notices, as the clouds document them (each cloud entry's SpotNotice, stacks/clouds/<name>; TestSpotNotices):
// GKE, "Spot VMs" (docs.cloud.google.com/kubernetes-engine/docs/concepts/spot-vms): the node's
// Pods get 30 s of graceful termination after the preemption notice; EC2, "Spot Instance interruption
// notices" (docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html):
// "a warning that is issued two minutes before Amazon EC2 stops or terminates your Spot
// Instance". (Azure's Spot pools are refused under every workload: TestAzureSpotEveryWorkload.)
func TestGraceWithinSpotNotice(t *testing.T) {
	spotGPU := func(name string, p map[string]any) {
		if name == "gpu" {
			p["spot"] = true
		}
	}
	for _, tc := range []struct {
		name, file, stack string
		set               map[string]string
		wantDefault       int    // the towers' grace period when the stack loads
		want              string // a problem, "" when the stack loads
	}{
		{"gcp spot: default 30 s", "../Pulumi.prod.yaml", "prod", nil, 30, ""},
		{"gcp spot: 30 s", "../Pulumi.prod.yaml", "prod", map[string]string{"kolotoc:towers": `{"count":8,"gpusPerTower":8,"pool":"gpu","terminationGracePeriodSeconds":30}`}, 30, ""},
		{"gcp spot: 60 s refused", "../Pulumi.prod.yaml", "prod", map[string]string{"kolotoc:towers": `{"count":8,"gpusPerTower":8,"pool":"gpu","terminationGracePeriodSeconds":60}`}, 0,
			"kolotoc:towers.terminationGracePeriodSeconds = 60"},
		{"gcp spot: elastic 45 s refused", "../Pulumi.prod.yaml", "prod", map[string]string{
			"kolotoc:towers": `{"count":4,"gpusPerTower":8,"pool":"gpu"}`, "kolotoc:elastic": `{"enabled":true,"pool":"gpu","nodes":2,"maxNodes":2,"command":["python","train.py"],"terminationGracePeriodSeconds":45}`}, 0,
			"kolotoc:elastic.terminationGracePeriodSeconds = 45"},
		{"aws spot: default 120 s", "../examples/aws/Pulumi.aws.yaml", "aws", nil, 120, ""},
		{"aws spot: 121 s refused", "../examples/aws/Pulumi.aws.yaml", "aws", map[string]string{"kolotoc:towers": `{"count":2,"gpusPerTower":8,"pool":"gpu","launcherPool":"ops","terminationGracePeriodSeconds":121}`}, 0,
			"allowed: 1..120"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := withPools(t, rawWithSecrets(t, tc.file), spotGPU)
			raw.Stack = tc.stack
			for k, v := range tc.set {
				raw.Values[k] = v
			}
			c, err := stacks.Load(raw)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && c.Towers.TerminationGracePeriodSeconds != tc.wantDefault:
				t.Errorf("towers.terminationGracePeriodSeconds %d, want %d", c.Towers.TerminationGracePeriodSeconds, tc.wantDefault)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a problem %q", err, tc.want)
			}
		})
	}
	// On demand, the default suits a large model's checkpoint; no cloud notice bounds it.
	c, err := stacks.Load(rawWithSecrets(t, "../Pulumi.prod.yaml"))
	if err != nil || c.Towers.TerminationGracePeriodSeconds != 120 {
		t.Errorf("prod on demand: grace %d (%v), want 120", c.Towers.TerminationGracePeriodSeconds, err)
	}
}

// TestRestartsNeedASharedStore: a restart resumes from the checkpoint every tower (or elastic
// worker) must read; storage.type local is a directory of each node, so restarts over a pool of
// several nodes are refused, keyed, unless turned off; one node (the dev stack's real node) is
// fine.
func TestRestartsNeedASharedStore(t *testing.T) {
	if _, err := stacks.Load(devRaw(t)); err != nil {
		t.Fatalf("dev (local store, one real node, restarts on) refused: %v", err)
	}
	local := func(set map[string]string) error {
		raw := gpuRaw(t)
		raw.Values["kolotoc:storage"] = `{"type":"local"}`
		for k, v := range set {
			raw.Values[k] = v
		}
		_, err := stacks.Load(raw)
		return err
	}
	if err := local(nil); err == nil || !strings.Contains(err.Error(), "kolotoc:towers.maxRestarts") || !strings.Contains(err.Error(), "storage.type local") {
		t.Errorf("restarts with a local store over several nodes: %v, want kolotoc:towers.maxRestarts refused", err)
	}
	if err := local(map[string]string{"kolotoc:towers": `{"maxRestarts":0}`}); err != nil && strings.Contains(err.Error(), "maxRestarts") {
		t.Errorf("towers.maxRestarts 0 with a local store: %v", err)
	}
	err := local(map[string]string{"kolotoc:towers": `{"maxRestarts":0}`,
		"kolotoc:elastic": `{"enabled":true,"command":["python","train.py"]}`})
	if err == nil || !strings.Contains(err.Error(), "kolotoc:elastic.maxRestarts") {
		t.Errorf("elastic restarts with a local store over several nodes: %v, want kolotoc:elastic.maxRestarts refused", err)
	}
}
