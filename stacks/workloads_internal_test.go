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
		{"exact", []GPUDemand{{Who: "a", Pods: 2, GPUs: 8}, {Who: "b", Pods: 2, GPUs: 4}}, 3, 8, true},
		{"one GPU too many", []GPUDemand{{Who: "a", Pods: 2, GPUs: 8}, {Who: "b", Pods: 2, GPUs: 4}, {Who: "c", Pods: 1, GPUs: 1}}, 3, 8, false},
		{"fragmented: enough GPUs, no node with 6", []GPUDemand{{Who: "a", Pods: 2, GPUs: 6}, {Who: "b", Pods: 2, GPUs: 4}}, 2, 8, false},
		{"small pieces fill gaps", []GPUDemand{{Who: "a", Pods: 2, GPUs: 6}, {Who: "b", Pods: 4, GPUs: 1}}, 2, 8, true},
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

// TestGPUNodes: the nodes GPU pods take, packed (first-fit decreasing) or, as Karpenter places
// them, each spreading workload's pods one to a node until the limit, then shared; and the pods
// no node within the limit holds.
func TestGPUNodes(t *testing.T) {
	for _, tc := range []struct {
		name                string
		demands             []GPUDemand
		capacity, limit     int
		spread              bool
		wantNodes, wantLeft int
	}{
		{"packed", []GPUDemand{{Who: "towers", Pods: 4, GPUs: 4, Spread: true}}, 8, -1, false, 2, 0},
		{"spread without a limit", []GPUDemand{{Who: "towers", Pods: 4, GPUs: 4, Spread: true}}, 8, -1, true, 4, 0},
		{"spread up to the limit, then shared", []GPUDemand{{Who: "towers", Pods: 4, GPUs: 4, Spread: true}}, 8, 3, true, 3, 0},
		{"a workload that does not spread packs", []GPUDemand{{Who: "workers", Pods: 4, GPUs: 4}}, 8, 4, true, 2, 0},
		{"two spreading workloads share nodes", []GPUDemand{{Who: "towers", Pods: 2, GPUs: 4, Spread: true}, {Who: "elastic", Pods: 2, GPUs: 4, Spread: true}}, 8, 4, true, 2, 0},
		{"beyond the limit: left over", []GPUDemand{{Who: "towers", Pods: 3, GPUs: 8, Spread: true}}, 8, 2, true, 2, 1},
		{"larger than a node", []GPUDemand{{Who: "towers", Pods: 1, GPUs: 16}}, 8, 4, true, 0, 1},
		{"none", nil, 8, 4, true, 0, 0},
	} {
		nodes, left := gpuNodes(tc.demands, tc.capacity, tc.limit, tc.spread)
		if nodes != tc.wantNodes || left != tc.wantLeft {
			t.Errorf("%s: gpuNodes = %d nodes, %d left; want %d, %d", tc.name, nodes, left, tc.wantNodes, tc.wantLeft)
		}
	}
}
