package meta

import (
	"slices"
	"testing"
)

func TestFillSetsOnlyZeroValues(t *testing.T) {
	s, given := "", "given"
	Fill(&s, "default")
	Fill(&given, "default")
	n, m := 0, 3
	Fill(&n, 2)
	Fill(&m, 2)
	if s != "default" || given != "given" || n != 2 || m != 3 {
		t.Errorf("Fill: got %q, %q, %d, %d; want default, given, 2, 3", s, given, n, m)
	}
	Fill(&s, "other") // a second pass changes nothing
	if s != "default" {
		t.Errorf("Fill twice: got %q, want default", s)
	}
}

func TestFillPtrKeepsAnExplicitFalse(t *testing.T) {
	var unset *bool
	off := false
	set := &off
	FillPtr(&unset, true)
	FillPtr(&set, true)
	if unset == nil || !*unset {
		t.Errorf("FillPtr(nil, true): got %v, want true", unset)
	}
	if *set {
		t.Error("FillPtr overwrote an explicit false")
	}
}

func TestFillSliceCopiesTheDefault(t *testing.T) {
	def := []string{"a", "b"}
	var got []string
	FillSlice(&got, def)
	got[0] = "changed"
	if def[0] != "a" {
		t.Errorf("FillSlice shares the default's array: default became %v", def)
	}
	given := []string{"x"}
	FillSlice(&given, def)
	if !slices.Equal(given, []string{"x"}) {
		t.Errorf("FillSlice replaced a given slice: %v", given)
	}
}

func TestPoolsFirstOfEachKind(t *testing.T) {
	ps := Pools{{Name: "v100", GPUsPerNode: 4, CPUs: 32}, {Name: "cpu", CPUs: 16}, {Name: "a100", GPUsPerNode: 8}}
	if got := ps.First(true); got != "v100" {
		t.Errorf("First(gpu) = %q, want v100", got)
	}
	if got := ps.First(false); got != "cpu" {
		t.Errorf("First(cpu) = %q, want cpu", got)
	}
	gpuOnly := Pools{{Name: "gpu", GPUsPerNode: 8}}
	if got := gpuOnly.First(false); got != "gpu" {
		t.Errorf("First(cpu) without a CPU pool = %q, want the first pool, gpu", got)
	}
	if got := (Pools{{Name: "cpu"}}).First(true); got != "" {
		t.Errorf("First(gpu) without a GPU pool = %q, want none", got)
	}
	if got := ps.Get("cpu"); got.CPUs != 16 {
		t.Errorf("Get(cpu) = %+v", got)
	}
	if got := ps.Get("missing"); got != (Pool{}) {
		t.Errorf("Get(missing) = %+v, want the zero pool", got)
	}
}

// TestFitDefaults: a workload's default requests are cut to what one node of its pool gives a
// pod (all cores but one, three quarters of the memory) only when they would not fit; a pool of
// unknown size keeps them.
func TestFitDefaults(t *testing.T) {
	for _, tc := range []struct {
		pool         Pool
		cpu, memory  string
		wantC, wantM string
	}{
		{Pool{CPUs: 8, Memory: "61Gi"}, "8", "64Gi", "7", "45Gi"},   // p3.2xlarge: the torchelastic seed's own machine
		{Pool{CPUs: 96, Memory: "680Gi"}, "8", "64Gi", "8", "64Gi"}, // a2-highgpu-8g: the defaults fit
		{Pool{CPUs: 16, Memory: "64Gi"}, "8", "64Gi", "8", "48Gi"},  // n2-standard-16: the memory is cut
		{Pool{CPUs: 1, Memory: "1Gi"}, "8", "64Gi", "1", "1Gi"},     // at least one core and 1Gi
		{Pool{}, "8", "64Gi", "8", "64Gi"},                          // size unknown: kept
	} {
		if c, m := tc.pool.FitDefaults(tc.cpu, tc.memory); c != tc.wantC || m != tc.wantM {
			t.Errorf("%+v: %s, %s; want %s, %s", tc.pool, c, m, tc.wantC, tc.wantM)
		}
	}
}
