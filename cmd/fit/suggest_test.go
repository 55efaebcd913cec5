package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	cpuPod := func(i int, node string) Pod {
		p := Pod{Name: fmt.Sprintf("carrier-%d", i), Workload: "StatefulSet/carrier", Pool: "cpu", Node: node,
			Requests: Resources{MilliCPU: 6000, Memory: 8 * gi, Pods: 1}}
		if node == "" {
			p.Reason = "0/4 nodes are available: 2 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
		}
		return p
	}
	cpuPool := Pool{Name: "cpu", Index: 1, Nodes: 2, PerNode: n2, Allocatable: Resources{MilliCPU: 32000, Memory: 128 * gi, Pods: 220}}
	gpuPool := Pool{Name: "gpu", Index: 0, Nodes: 1, PerNode: a2, Allocatable: a2}

	for _, tc := range []struct {
		name string
		r    *Report
		want []string // each a substring of one suggestion, in order
	}{
		{name: "autoscaling pool one node short", r: shortReport(), want: []string{
			"pool gpu: 1 more node(s) of its size place the 1 pod(s) waiting: kolotoc:nodePools[0].nodes: 1 → 2 (maxNodes 2 allows it: an autoscaling pool grows on demand, but fit checks the 1 node(s) the stack starts with)",
			"or fewer StatefulSet/tower pods: kolotoc:towers.count: 2 → 1",
		}},
		{name: "fixed pool: maxNodes must rise too", r: &Report{
			Pools: []Pool{{Name: "gpu", Index: 0, Nodes: 1, MaxNodes: 1, PerNode: a2}},
			Pods:  []Pod{tower("tower-0", "n"), tower("tower-1", ""), tower("tower-2", "")},
		}, want: []string{"kolotoc:nodePools[0].nodes: 1 → 3, and maxNodes: 1 → 3", "kolotoc:towers.count: 3 → 1"}},
		{name: "pending pods packed two to a node", r: &Report{
			// 16-CPU nodes hold two 6-CPU carriers each: five waiting need three more nodes.
			Pools: []Pool{gpuPool, cpuPool},
			Pods: []Pod{cpuPod(0, "a"), cpuPod(1, "a"), cpuPod(2, "b"), cpuPod(3, "b"),
				cpuPod(4, ""), cpuPod(5, ""), cpuPod(6, ""), cpuPod(7, ""), cpuPod(8, "")},
		}, want: []string{"pool cpu: 3 more node(s) of its size place the 5 pod(s) waiting: kolotoc:nodePools[1].nodes: 2 → 5", "kolotoc:carriers.count: 9 → 4"}},
		{name: "two workloads waiting: no count to lower", r: &Report{
			Pools: []Pool{gpuPool, cpuPool},
			Pods: []Pod{cpuPod(0, ""), {Name: "etcd-0", Workload: "StatefulSet/etcd", Pool: "cpu", Reason: "0/3 nodes are available: 2 Insufficient memory.",
				Requests: Resources{MilliCPU: 500, Memory: 60 * gi, Pods: 1}}},
		}, want: []string{"pool cpu: 2 more node(s) of its size place the 2 pod(s) waiting: kolotoc:nodePools[1].nodes: 2 → 4"}},
		{name: "a pod larger than any node", r: &Report{
			Pools: []Pool{gpuPool, cpuPool},
			Pods: []Pod{{Name: "carrier-0", Workload: "StatefulSet/carrier", Pool: "cpu", Reason: "0/3 nodes are available: 2 Insufficient memory.",
				Requests: Resources{MilliCPU: 1000, Memory: 96 * gi, Pods: 1}}},
		}, want: []string{"StatefulSet/carrier: each pod asks 96Gi memory (a node has 64Gi; kolotoc:carriers.memory), more than any node of pool cpu holds: lower the request, or give the pool a larger kolotoc:nodePools[1].machineType"}},
		{name: "not a lack of room", r: &Report{
			Pools: []Pool{gpuPool},
			Pods: []Pod{{Name: "tower-0", Workload: "StatefulSet/tower", Pool: "gpu", Requests: Resources{GPUs: 8, Pods: 1},
				Reason: "0/2 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 1 node(s) didn't match Pod's node affinity/selector."}},
		}, want: []string{"StatefulSet/tower: not a matter of count or size"}},
		{name: "node agents and undecided pods get none", r: &Report{
			Pools: []Pool{gpuPool},
			Pods: []Pod{{Name: "nvidia-device-plugin-abc", Workload: "DaemonSet/nvidia-device-plugin", Reason: "0/2 nodes are available: 1 Insufficient cpu."},
				{Name: "tower-0", Workload: "StatefulSet/tower", Pool: "gpu", Undecided: true}},
		}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Suggest(tc.r)
			if len(got) != len(tc.want) {
				t.Fatalf("%d suggestions, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("suggestion %d:\n  %s\nwant it to contain:\n  %s", i, got[i], w)
				}
			}
		})
	}
}

func TestPackNodes(t *testing.T) {
	pods := func(n int, r Resources) []Pod {
		out := make([]Pod, n)
		for i := range out {
			out[i].Requests = r
		}
		return out
	}
	for _, tc := range []struct {
		name string
		pods []Pod
		want int
	}{
		{"one GPU tower per 8-GPU node", pods(3, Resources{GPUs: 8, MilliCPU: 4000, Memory: 16 * gi}), 3},
		{"two 4-GPU towers per node", pods(3, Resources{GPUs: 4, MilliCPU: 4000, Memory: 16 * gi}), 2},
		{"memory bounds before CPU", pods(5, Resources{MilliCPU: 1000, Memory: 300 * gi}), 3},
		{"pod slots count", pods(111, Resources{MilliCPU: 1}), 2},
		{"large first, small fill the gaps", append(pods(2, Resources{GPUs: 6}), pods(4, Resources{GPUs: 1})...), 2},
	} {
		if got := packNodes(tc.pods, a2); got != tc.want {
			t.Errorf("%s: %d nodes, want %d", tc.name, got, tc.want)
		}
	}
}
