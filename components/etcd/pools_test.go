package etcd

import (
	"testing"

	"kolotoc/components/meta"
)

// TestDefaultPools: the members take the first CPU pool, never a GPU pool ahead of it.
func TestDefaultPools(t *testing.T) {
	c := Config{}
	c.DefaultPools(meta.Pools{{Name: "gpu", GPUsPerNode: 8}, {Name: "cpu", CPUs: 4}})
	if c.Pool != "cpu" {
		t.Errorf("pool %q, want cpu", c.Pool)
	}
	named := Config{Pool: "other"}
	named.DefaultPools(meta.Pools{{Name: "cpu"}})
	if named.Pool != "other" {
		t.Errorf("a named pool changed to %q", named.Pool)
	}
}
