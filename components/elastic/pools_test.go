package elastic

import (
	"testing"

	"kolotoc/components/meta"
)

// TestDefaultPools: the workers take the first GPU pool and its GPUs per node; a named pool
// sizes them by its own; gpusPerNode given is kept.
func TestDefaultPools(t *testing.T) {
	pools := meta.Pools{{Name: "cpu", CPUs: 16}, {Name: "v100", GPUsPerNode: 4}, {Name: "a100", GPUsPerNode: 8}}
	for _, tc := range []struct {
		pool     string
		gpus     int
		wantPool string
		wantGPUs int
	}{{"", 0, "v100", 4}, {"a100", 0, "a100", 8}, {"a100", 1, "a100", 1}, {"cpu", 0, "cpu", 0}} {
		c := NewConfig()
		c.Pool, c.GPUsPerNode = tc.pool, tc.gpus
		c.DefaultPools(pools)
		if c.Pool != tc.wantPool || c.GPUsPerNode != tc.wantGPUs {
			t.Errorf("pool %q gpus %d: got %q, %d; want %q, %d", tc.pool, tc.gpus, c.Pool, c.GPUsPerNode, tc.wantPool, tc.wantGPUs)
		}
	}
}
