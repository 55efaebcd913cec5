package dask

import (
	"testing"

	"kolotoc/components/meta/problemtest"
)

// problems records what Validate reports, as key=value: msg.
type problems = problemtest.Recorder

// TestConfigDefaultAndValidate: sections that say nothing but what the stack fills from the pool
// get the dask package's defaults, a second Default changes nothing, and the result passes; each
// bad setting is reported with its full key, the value and what is allowed.
func TestConfigDefaultAndValidate(t *testing.T) {
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

	var none problems
	k.Validate(&none)
	s.Validate(&none)
	if len(none) != 0 {
		t.Errorf("defaulted sections reported %v", none)
	}

	for _, tc := range []struct {
		name     string
		carriers func(*CarriersConfig)
		sentinel func(*SentinelsConfig)
		want     string
	}{
		{name: "no carriers", carriers: func(k *CarriersConfig) { k.Count = 0 }, want: "carriers.count=0: must be at least 1"},
		{name: "no worker processes", carriers: func(k *CarriersConfig) { k.WorkersPerCarrier = -1 }, want: "carriers.workersPerCarrier=-1: must be at least 1"},
		{name: "more processes than the policies' port range", carriers: func(k *CarriersConfig) { k.WorkersPerCarrier = MaxProcesses + 1 },
			want: "carriers.workersPerCarrier=1001: allowed: 1..1000 (each process listens on a port of a fixed range the NetworkPolicies open)"},
		{name: "no sentinel threads", sentinel: func(s *SentinelsConfig) { s.Threads = 0 }, want: "sentinels.threads=0: must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			badK, badS := k, s
			if tc.carriers != nil {
				tc.carriers(&badK)
			}
			if tc.sentinel != nil {
				tc.sentinel(&badS)
			}
			var got problems
			badK.Validate(&got)
			badS.Validate(&got)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("reported %q, want [%q]", got, tc.want)
			}
		})
	}
	var most problems
	full := k
	full.WorkersPerCarrier = MaxProcesses
	full.Validate(&most)
	if len(most) != 0 {
		t.Errorf("%d worker processes, the most the port ranges hold, reported %v", MaxProcesses, most)
	}
}
