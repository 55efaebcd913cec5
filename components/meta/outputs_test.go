package meta

import (
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// slowMocks holds the creation of every kolotoc:test:Slow resource until release is closed, as a
// node pool's creation holds its dependants.
type slowMocks struct{ release chan struct{} }

func (m *slowMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	if args.TypeToken == "kolotoc:test:Slow" {
		<-m.release
	}
	return args.Name + "-id", args.Inputs, nil
}

func (m *slowMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// TestRegisterOutputsDoesNotHoldTheProgram: a component that depends on a resource still being
// created gets its outputs registered without holding the program until that resource exists,
// and WaitOutputs returns once they are. With ctx.RegisterResourceOutputs called directly, the
// program stops at the component until the slow resource is created: here, until the guard
// below gives up.
func TestRegisterOutputsDoesNotHoldTheProgram(t *testing.T) {
	m := &slowMocks{release: make(chan struct{})}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		slow := &pulumi.CustomResourceState{}
		if err := ctx.RegisterResource("kolotoc:test:Slow", "pool", nil, slow); err != nil {
			return err
		}
		comp := &pulumi.ResourceState{}
		if err := ctx.RegisterComponentResource("kolotoc:test:Component", "workload", comp,
			pulumi.DependsOn([]pulumi.Resource{slow})); err != nil {
			return err
		}
		returned := make(chan error, 1)
		go func() { returned <- RegisterOutputs(ctx, comp, pulumi.Map{"name": pulumi.String("workload")}) }()
		select {
		case err := <-returned:
			if err != nil {
				t.Errorf("RegisterOutputs: %v", err)
			}
		case <-time.After(30 * time.Second): // a deadlock guard, not a measure of speed
			t.Error("RegisterOutputs held the program until the component's dependency was created")
		}
		close(m.release)
		return WaitOutputs(ctx)
	}, pulumi.WithMocks("kolotoc", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
}
