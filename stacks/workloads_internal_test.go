package stacks

import (
	"fmt"
	"strings"
	"testing"
)

func TestPackGPUs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		demands  []GPUDemand
		nodes    int
		capacity int
		want     bool
	}{
		{"exact", []GPUDemand{{"a", 2, 8, ""}, {"b", 2, 4, ""}}, 3, 8, true},
		{"one GPU too many", []GPUDemand{{"a", 2, 8, ""}, {"b", 2, 4, ""}, {"c", 1, 1, ""}}, 3, 8, false},
		{"fragmented: enough GPUs, no node with 6", []GPUDemand{{"a", 2, 6, ""}, {"b", 2, 4, ""}}, 2, 8, false},
		{"small pieces fill gaps", []GPUDemand{{"a", 2, 6, ""}, {"b", 4, 1, ""}}, 2, 8, true},
	} {
		if got := packGPUs(tc.demands, tc.nodes, tc.capacity); got != tc.want {
			t.Errorf("%s: packGPUs = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNoEntriesRefused: a program that does not import kolotoc/stacks/workloads registers no
// workload, and would deploy a stack without its workloads (and delete the deployed ones). Every
// phase refuses to run without them.
func TestNoEntriesRefused(t *testing.T) {
	saved := workloads
	defer func() { workloads = saved }()
	workloads = nil
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `import _ "kolotoc/stacks/workloads"`) {
			t.Errorf("Load without entries: recovered %v, want the panic that names the import", r)
		}
	}()
	_, _ = Load(Raw{Values: map[string]string{"kolotoc:cloud": CloudSimulated}})
	t.Error("Load ran without any workload registered")
}
