package dask

import (
	"testing"

	"kolotoc/components/meta"
)

// TestDefaultPools: carriers take the first CPU pool and one worker process per core of its
// nodes; a pool or a count given is kept; with only GPU pools they share the first one.
func TestDefaultPools(t *testing.T) {
	pools := meta.Pools{{Name: "gpu", GPUsPerNode: 8, CPUs: 96}, {Name: "cpu", CPUs: 16}, {Name: "big", CPUs: 64}}
	c := NewCarriersConfig()
	c.DefaultPools(pools)
	if c.Pool != "cpu" || c.WorkersPerCarrier != 16 {
		t.Errorf("defaults: pool %q, %d workers; want cpu, 16", c.Pool, c.WorkersPerCarrier)
	}
	named := CarriersConfig{Pool: "big", WorkersPerCarrier: 4}
	named.DefaultPools(pools)
	if named.Pool != "big" || named.WorkersPerCarrier != 4 {
		t.Errorf("given values changed: pool %q, %d workers", named.Pool, named.WorkersPerCarrier)
	}
	gpuOnly := NewCarriersConfig()
	gpuOnly.DefaultPools(pools[:1])
	if gpuOnly.Pool != "gpu" || gpuOnly.WorkersPerCarrier != 96 {
		t.Errorf("GPU-only stack: pool %q, %d workers; want gpu, 96", gpuOnly.Pool, gpuOnly.WorkersPerCarrier)
	}
}
