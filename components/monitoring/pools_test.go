package monitoring

import (
	"testing"

	"kolotoc/components/meta"
)

// TestDefaultPools: the DCGM exporter runs when the stack has a GPU pool, not otherwise, and an
// explicit choice is kept.
func TestDefaultPools(t *testing.T) {
	gpu, cpu := Config{}, Config{}
	gpu.DefaultPools(meta.Pools{{Name: "cpu"}, {Name: "gpu", GPUsPerNode: 1}})
	cpu.DefaultPools(meta.Pools{{Name: "cpu"}})
	if !gpu.DCGMOn() || cpu.DCGMOn() {
		t.Errorf("DCGM exporter with a GPU pool %v, without %v; want true, false", gpu.DCGMOn(), cpu.DCGMOn())
	}
	off := false
	explicit := Config{DCGMExporter: &off}
	explicit.DefaultPools(meta.Pools{{Name: "gpu", GPUsPerNode: 1}})
	if explicit.DCGMOn() {
		t.Error("dcgmExporter: false was turned on")
	}
}
