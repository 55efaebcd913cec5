package tfcluster

import (
	"testing"

	"kolotoc/components/meta"
)

// TestDefaultPools: the workers take the first GPU pool and its GPUs per node; the parameter
// servers, the chief and the evaluator take the first CPU pool and no GPU.
func TestDefaultPools(t *testing.T) {
	c := NewConfig()
	c.DefaultPools(meta.Pools{{Name: "gpu", GPUsPerNode: 8}, {Name: "cpu", CPUs: 16}})
	if c.Workers.Pool != "gpu" || c.Workers.GPUs != 8 {
		t.Errorf("workers: pool %q, %d GPUs; want gpu, 8", c.Workers.Pool, c.Workers.GPUs)
	}
	for _, r := range []Role{c.PS, c.Chief, c.Evaluator} {
		if r.Pool != "cpu" || r.GPUs != 0 {
			t.Errorf("a CPU role got pool %q, %d GPUs", r.Pool, r.GPUs)
		}
	}
}
