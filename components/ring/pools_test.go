package ring

import (
	"testing"

	"kolotoc/components/meta"
)

// The stack's pools as the sections' tests see them: a CPU pool first, then two GPU pools.
var testPools = meta.Pools{{Name: "cpu", CPUs: 16}, {Name: "v100", GPUsPerNode: 4, CPUs: 32}, {Name: "a100", GPUsPerNode: 8, CPUs: 64}}

// TestDefaultPools: towers that name no pool take the first GPU pool and its GPUs, then one slot
// per GPU; a named pool sizes them by its own nodes; a CPU pool makes CPU towers with one slot.
func TestDefaultPools(t *testing.T) {
	for _, tc := range []struct {
		name             string
		pool             string
		gpus             int
		wantPool         string
		wantGPUs, wantSl int
	}{
		{"first GPU pool", "", 0, "v100", 4, 4},
		{"named pool", "a100", 0, "a100", 8, 8},
		{"explicit GPUs kept", "a100", 2, "a100", 2, 2},
		{"CPU pool", "cpu", 0, "cpu", 0, DefaultCPUTowerSlots},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConfig()
			c.Pool, c.GPUsPerTower = tc.pool, tc.gpus
			c.DefaultPools(testPools)
			c.Default()
			if c.Pool != tc.wantPool || c.GPUsPerTower != tc.wantGPUs || c.Slots != tc.wantSl {
				t.Errorf("pool %q, %d GPUs, %d slots; want %q, %d, %d", c.Pool, c.GPUsPerTower, c.Slots, tc.wantPool, tc.wantGPUs, tc.wantSl)
			}
		})
	}
	none := NewConfig()
	none.DefaultPools(meta.Pools{{Name: "cpu", CPUs: 8}})
	if none.Pool != "" {
		t.Errorf("without a GPU pool the towers took %q; the stack's validation must name the missing pool", none.Pool)
	}
}
