package elastic

import (
	"reflect"
	"testing"
)

// TestConfigDefault: a section that says nothing but what the stack fills (the pool, its GPUs,
// the rendezvous id) gets the elastic package's defaults, with maxNodes following minNodes and
// nodes following maxNodes; a second Default changes nothing, nor does it touch what the stack
// file says.
func TestConfigDefault(t *testing.T) {
	c := NewConfig()
	c.Enabled, c.Pool, c.GPUsPerNode, c.RdzvID = true, "gpu", 8, "kolotoc-dev" // the stack's
	c.Default()
	want := Config{
		Enabled: true, MinNodes: DefaultMinNodes, MaxNodes: DefaultMinNodes, Nodes: DefaultMinNodes,
		GPUsPerNode: 8, Pool: "gpu", Image: DefaultImage, RdzvBackend: BackendC10d, RdzvID: "kolotoc-dev",
		RdzvPort: DefaultRdzvPort, MaxRestarts: DefaultMaxRestarts, CPU: defaultCPU, Memory: defaultMemory,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
	again := c
	again.Default()
	if !reflect.DeepEqual(again, c) {
		t.Errorf("Default is not idempotent: %+v then %+v", c, again)
	}

	for _, tc := range []struct {
		name                string
		min, max, nodes     int
		wantMax, wantNnodes int
	}{
		{name: "maxNodes follows minNodes", min: 2, wantMax: 2, wantNnodes: 2},
		{name: "nodes follow maxNodes", min: 1, max: 3, wantMax: 3, wantNnodes: 3},
		{name: "nodes as said", min: 1, max: 3, nodes: 2, wantMax: 3, wantNnodes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Config{MinNodes: tc.min, MaxNodes: tc.max, Nodes: tc.nodes}
			s.Default()
			if s.MinNodes != tc.min || s.MaxNodes != tc.wantMax || s.Nodes != tc.wantNnodes {
				t.Errorf("min %d max %d nodes %d, want %d %d %d", s.MinNodes, s.MaxNodes, s.Nodes, tc.min, tc.wantMax, tc.wantNnodes)
			}
		})
	}

	set := Config{Image: "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", RdzvBackend: BackendEtcdV2, RdzvPort: 29500, CPU: "4", Memory: "8Gi"}
	kept := set
	kept.Default()
	if kept.Image != set.Image || kept.RdzvBackend != set.RdzvBackend || kept.RdzvPort != set.RdzvPort || kept.CPU != set.CPU || kept.Memory != set.Memory {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}
	zero := Config{MaxRestarts: 0} // as a stack file that says maxRestarts: 0 leaves it
	zero.Default()
	if zero.MaxRestarts != 0 {
		t.Errorf("Default turned an explicit 0 restarts into %d; only NewConfig presets them", zero.MaxRestarts)
	}
}
