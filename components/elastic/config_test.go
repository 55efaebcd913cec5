package elastic

import (
	"reflect"
	"strings"
	"testing"

	"kolotoc/components/meta/problemtest"
)

// problems records what Validate reports, as key=value: msg.
type problems = problemtest.Recorder

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
		ShmSize: defaultMemory, // /dev/shm as large as the worker's memory
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

// TestConfigValidate: the defaulted section passes, with every backend; each bad setting is
// reported with its full key, the value and what is allowed; nodes outside the bounds are
// reported only when the bounds themselves are in order.
func TestConfigValidate(t *testing.T) {
	c := NewConfig()
	c.Pool, c.GPUsPerNode, c.RdzvID = "gpu", 8, "kolotoc-dev" // the stack's
	c.Default()
	for _, backend := range Backends {
		ok := c
		ok.RdzvBackend = backend
		var none problems
		ok.Validate(&none)
		if len(none) != 0 {
			t.Errorf("defaulted section with backend %s reported %v", backend, none)
		}
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"no nodes", func(c *Config) { c.MinNodes, c.MaxNodes, c.Nodes = 0, 0, 0 }, []string{"elastic.minNodes=0: must be at least 1"}},
		{"min above max", func(c *Config) { c.MinNodes, c.MaxNodes = 3, 2 },
			[]string{"elastic.minNodes=3: more than elastic.maxNodes (2); allowed: 1..2"}},
		{"nodes above max", func(c *Config) { c.MinNodes, c.MaxNodes, c.Nodes = 1, 2, 3 },
			[]string{"elastic.nodes=3: worker pods to run must lie between minNodes and maxNodes; allowed: 1..2"}},
		{"negative min, nodes above max", func(c *Config) { c.MinNodes, c.MaxNodes, c.Nodes = -1, 1, 2 }, []string{
			"elastic.minNodes=-1: must be at least 1",
			"elastic.nodes=2: worker pods to run must lie between minNodes and maxNodes; allowed: -1..1"}},
		{"unknown backend", func(c *Config) { c.RdzvBackend = "zookeeper" }, []string{"elastic.rdzvBackend=zookeeper: allowed: c10d, etcd-v2, etcd"}},
		{"no backend", func(c *Config) { c.RdzvBackend = "" }, []string{"elastic.rdzvBackend=(unset): allowed: c10d, etcd-v2, etcd"}},
		{"no rendezvous id", func(c *Config) { c.RdzvID = "" },
			[]string{"elastic.rdzvId=(unset): letters, digits, '.', '_' and '-', at most 63 characters, starting with a letter or digit"}},
		{"rendezvous id too long", func(c *Config) { c.RdzvID = strings.Repeat("a", 64) },
			[]string{"elastic.rdzvId=" + strings.Repeat("a", 64) + ": letters, digits, '.', '_' and '-', at most 63 characters, starting with a letter or digit"}},
		{"rendezvous id with a slash", func(c *Config) { c.RdzvID = "a/b" },
			[]string{"elastic.rdzvId=a/b: letters, digits, '.', '_' and '-', at most 63 characters, starting with a letter or digit"}},
		{"port out of range", func(c *Config) { c.RdzvPort = 70000 }, []string{"elastic.rdzvPort=70000: allowed: 1..65535"}},
		{"negative restarts", func(c *Config) { c.MaxRestarts = -1 }, []string{"elastic.maxRestarts=-1: must be 0 or more"}},
		{"no restarts", func(c *Config) { c.MaxRestarts = 0 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c
			tc.edit(&bad)
			var got problems
			bad.Validate(&got)
			if !reflect.DeepEqual([]string(got), tc.want) {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNewSaysWhatItAccepts: New's refusal of impossible Args says the bounds it checks: CPU
// workers (gpusPerNode 0) are accepted, so the message may not ask for gpusPerNode >= 1.
func TestNewSaysWhatItAccepts(t *testing.T) {
	for _, a := range []*Args{
		{Config: Config{MinNodes: 0, MaxNodes: 1, GPUsPerNode: 0}},
		{Config: Config{MinNodes: 1, MaxNodes: 1, GPUsPerNode: -1}},
	} {
		_, err := New(nil, "elastic", a) // refused before anything is registered
		if err == nil || !strings.Contains(err.Error(), "gpusPerNode >= 0") {
			t.Errorf("New(%+v) = %v, want a refusal naming gpusPerNode >= 0", a.Config, err)
		}
	}
}
