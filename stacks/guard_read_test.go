package stacks_test

import (
	"errors"
	"fmt"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	_ "kolotoc/stacks/workloads"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// outputsMocks answers stacks.ReadStackOutputs like the file backend under an update that is saving its
// checkpoint: the first `fails` reads find it being rewritten.
type outputsMocks struct {
	mu           sync.Mutex
	fails, calls int
}

func (m *outputsMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name + "-id", args.Inputs, nil
}

func (m *outputsMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	if args.Token != stacks.ReadStackOutputs {
		return nil, fmt.Errorf("unexpected invoke %s", args.Token)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.calls <= m.fails {
		return nil, errors.New("failed to load checkpoint: EOF")
	}
	return resource.NewPropertyMapFromMap(map[string]any{"outputs": map[string]any{}}), nil
}

// Seen in the e2e suite with several stacks updating at once: the first update of a stack failed
// with "cannot read the stack's last outputs ... failed to load checkpoint: EOF". A read that
// meets the checkpoint being saved is tried again; one that keeps failing still stops the update.
func TestGuardRereadsACheckpointBeingSaved(t *testing.T) {
	c, err := stacks.Load(exampleRaw(t, "../Pulumi.prod.yaml", "prod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fails     int
		wantError bool
	}{{fails: 0}, {fails: 2}, {fails: stacks.ReadOutputsAttempts, wantError: true}} {
		m := &outputsMocks{fails: tc.fails}
		err := pulumi.RunErr(func(ctx *pulumi.Context) error { return stacks.GuardStorage(ctx, c) },
			pulumi.WithMocks("kolotoc", "prod", m))
		if (err != nil) != tc.wantError {
			t.Errorf("%d failed reads: error %v, want error %v", tc.fails, err, tc.wantError)
		}
		if want := min(tc.fails+1, stacks.ReadOutputsAttempts); m.calls != want {
			t.Errorf("%d failed reads: %d reads, want %d", tc.fails, m.calls, want)
		}
	}
}
