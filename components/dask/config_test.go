package dask

import "testing"

// TestConfigDefault: sections that say nothing but what the stack fills from the pool get the
// dask package's defaults, and a second Default changes nothing.
func TestConfigDefault(t *testing.T) {
	k := NewCarriersConfig()
	k.Pool, k.WorkersPerCarrier = "cpu", 8 // the stack's, from the pool
	k.Default()
	if !k.Enabled || k.Count != DefaultCarriers || k.Image != DefaultImage || k.CPU == "" || k.Memory == "" {
		t.Errorf("carriers' defaults: %+v", k)
	}
	again := k
	again.Default()
	if again.Image != k.Image || again.CPU != k.CPU || again.Memory != k.Memory {
		t.Errorf("CarriersConfig.Default is not idempotent: %+v then %+v", k, again)
	}
	set := CarriersConfig{Image: "ghcr.io/dask/dask:2024.1.0", CPU: "2", Memory: "1Gi"}
	kept := set
	kept.Default()
	if kept.Image != set.Image || kept.CPU != set.CPU || kept.Memory != set.Memory {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}

	var s SentinelsConfig
	s.Default()
	if s.Enabled || s.Threads != DefaultSentinelThreads || s.CPU == "" || s.Memory == "" {
		t.Errorf("sentinels' defaults: %+v", s)
	}
	sAgain := s
	sAgain.Default()
	if sAgain != s {
		t.Errorf("SentinelsConfig.Default is not idempotent: %+v then %+v", s, sAgain)
	}
}
