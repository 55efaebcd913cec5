package meta

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

type plainMocks struct{}

func (plainMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name + "-id", args.Inputs, nil
}

func (plainMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// TestTrackerHoldsEveryResourceOnceTheConstructorReturns: the moment a component's constructor
// returns, the tracker holds every custom resource registered under it, nested components'
// included, and no component: what a dependant must wait for, without the race of a dependency
// on the component (whose children join it from their own goroutines).
func TestTrackerHoldsEveryResourceOnceTheConstructorReturns(t *testing.T) {
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		custom := func(name string, parent pulumi.Resource) error {
			return ctx.RegisterResource("kolotoc:test:Thing", name, nil, &pulumi.CustomResourceState{}, pulumi.Parent(parent))
		}
		track := &Tracker{}
		outer := &pulumi.ResourceState{}
		if err := ctx.RegisterComponentResource("kolotoc:test:Cluster", "cluster", outer, track.Option()); err != nil {
			return err
		}
		inner := &pulumi.ResourceState{}
		if err := ctx.RegisterComponentResource("kolotoc:test:Pools", "pools", inner, pulumi.Parent(outer)); err != nil {
			return err
		}
		for _, c := range []struct {
			name   string
			parent pulumi.Resource
		}{{"control-plane", outer}, {"pool-a", inner}, {"pool-b", inner}} {
			if err := custom(c.name, c.parent); err != nil {
				return err
			}
		}
		untracked := &pulumi.CustomResourceState{}
		if err := ctx.RegisterResource("kolotoc:test:Thing", "elsewhere", nil, untracked); err != nil {
			return err
		}
		for _, r := range track.Resources() {
			if _, ok := r.(pulumi.CustomResource); !ok {
				t.Errorf("tracked a component: %T", r)
			}
			if r == untracked {
				t.Error("tracked a resource registered outside the component")
			}
		}
		if n := len(track.Resources()); n != 3 {
			t.Errorf("tracked %d resources, want 3 (control-plane, pool-a, pool-b)", n)
		}
		return nil
	}, pulumi.WithMocks("kolotoc", "dev", plainMocks{}))
	if err != nil {
		t.Fatal(err)
	}
}
