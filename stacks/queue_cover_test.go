package stacks_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/stacks"
)

// TestQueueCoversTowerResources: the stack's ClusterQueue covers every resource the queued
// towers request, their fabric's (EFA, huge pages) and towers.resources' alike, with at least
// what they request. Kueue admits a workload only when its ClusterQueue's resourceGroups cover
// every resource its pods request (Kueue, "Cluster Queue", resources: a workload requesting a
// resource the queue does not cover stays inadmissible), so a resource left out holds the ring
// for ever.
func TestQueueCoversTowerResources(t *testing.T) {
	raw := exampleRaw(t, "../examples/aws/Pulumi.aws.yaml", "aws")
	raw.Values["kolotoc:queue"] = `{"type":"kueue"}`
	raw.Values["kolotoc:nodePools"] = `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"devices":{"example.com/nic":"2"}},` +
		`{"name":"cpu","machineType":"m6i.4xlarge"},{"name":"ops","machineType":"m6i.large"}]`
	raw.Values["kolotoc:towers"] = `{"count":2,"gpusPerTower":8,"pool":"gpu","launcherPool":"ops","resources":{"requests":{"example.com/nic":1,"ephemeral-storage":"10Gi"}}}`
	c, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	quota := stacks.QueueArgs(c).Quota // the ClusterQueue's coveredResources are its names
	for name, need := range c.TowersNeed() {
		have, ok := quota[name]
		if !ok {
			t.Errorf("the ClusterQueue does not cover %s, which the towers request (%s): Kueue would never admit them; quota %v", name, need, quota)
			continue
		}
		n, h := resource.MustParse(need), resource.MustParse(have)
		if n.Cmp(h) > 0 {
			t.Errorf("quota %s %s below the towers' need %s", name, have, need)
		}
	}
	for _, name := range []string{"vpc.amazonaws.com/efa", "hugepages-2Mi", "example.com/nic", "ephemeral-storage"} {
		if _, ok := c.TowersNeed()[name]; !ok {
			t.Errorf("the towers' need %v leaves out %s, which each tower requests", c.TowersNeed(), name)
		}
	}
	if quota["example.com/nic"] != "4" {
		t.Errorf("quota example.com/nic %q, want the pool's 2 nodes × 2", quota["example.com/nic"])
	}
}
