package cluster

import (
	"slices"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

type mocks struct{}

func (mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name + "-id", args.Inputs, nil
}

func (mocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) { return resource.PropertyMap{}, nil }

// TestNodeNamesInPoolOrder: the CPU pools' Nodes are registered first (bench/scale), but the
// nodeNames output and PoolNodes keep the pools' order and membership.
func TestNodeNamesInPoolOrder(t *testing.T) {
	var got []string
	var mu sync.Mutex
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		c, err := NewSimulated(ctx, "cluster", &SimulatedArgs{Name: "x", Labels: meta.Labels{Instance: "dev"}, Pools: []Pool{
			{Name: "gpu", Nodes: 2, GPUsPerNode: 8, CPUs: 96, Memory: "680Gi"},
			{Name: "cpu", Nodes: 1, CPUs: 16, Memory: "64Gi"},
		}})
		if err != nil {
			return err
		}
		if len(c.Nodes) != 3 || len(c.PoolNodes["gpu"]) != 2 || len(c.PoolNodes["cpu"]) != 1 {
			t.Errorf("Nodes %d, PoolNodes gpu %d cpu %d, want 3, 2, 1", len(c.Nodes), len(c.PoolNodes["gpu"]), len(c.PoolNodes["cpu"]))
		}
		c.NodeNames.ApplyT(func(names []string) error {
			mu.Lock()
			got = names
			mu.Unlock()
			return nil
		})
		return nil
	}, pulumi.WithMocks("kolotoc", "dev", mocks{}))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"x-gpu-0", "x-gpu-1", "x-cpu-0"}; !slices.Equal(got, want) {
		t.Errorf("nodeNames %v, want %v", got, want)
	}
}
