package main

import (
	"strings"
	"testing"
	"time"
)

const gi = int64(1) << 30

// a2 is one a2-highgpu-8g node as the local cluster reports it.
var a2 = Resources{GPUs: 8, MilliCPU: 96000, Memory: 680 * gi, Pods: 110}

// n2 is one n2-standard-16 node.
var n2 = Resources{MilliCPU: 16000, Memory: 64 * gi, Pods: 110}

func tower(name, node string) Pod {
	p := Pod{Name: name, Workload: "StatefulSet/tower", Pool: "gpu", Node: node,
		Requests: Resources{GPUs: 8, MilliCPU: 4500, Memory: 20 * gi, Pods: 1}}
	if node == "" {
		p.Reason = "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector."
	}
	return p
}

// shortReport: two 8-GPU towers on a GPU pool of one node that may grow to two.
func shortReport() *Report {
	return &Report{
		Stack: "short", Source: "Pulumi.short.yaml", Mirror: "fit-short",
		Pools: []Pool{
			{Name: "gpu", Index: 0, MachineType: "a2-highgpu-8g", Nodes: 1, MaxNodes: 2, PerNode: a2, Allocatable: a2,
				Requested: Resources{GPUs: 8, MilliCPU: 4550, Memory: 20*gi + 64<<20, Pods: 2}},
			{Name: "cpu", Index: 1, MachineType: "n2-standard-16", Nodes: 1, PerNode: n2, Allocatable: n2,
				Requested: Resources{MilliCPU: 2500, Memory: 16 * gi, Pods: 3}},
		},
		Pods: []Pod{
			tower("tower-0", "fit-short-gpu-0"), tower("tower-1", ""),
			{Name: "carrier-0", Workload: "StatefulSet/carrier", Pool: "cpu", Node: "fit-short-cpu-0", Requests: Resources{MilliCPU: 1000, Memory: 8 * gi, Pods: 1}},
			{Name: "nvidia-device-plugin-x7k2p", Workload: "DaemonSet/nvidia-device-plugin", Node: "fit-short-gpu-0", Requests: Resources{MilliCPU: 50, Memory: 64 << 20, Pods: 1}},
		},
		Deploy: 8300 * time.Millisecond, Decide: 200 * time.Millisecond,
	}
}

func TestReportDoesNotFit(t *testing.T) {
	r := shortReport()
	if r.Fits() || r.ExitCode() != 1 {
		t.Fatalf("a Pending tower: Fits %v, exit %d; want false, 1", r.Fits(), r.ExitCode())
	}
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, want := range []string{
		"make fit: stack short (Pulumi.short.yaml), mirrored on the local cluster as fit-short",
		// pools: nodes with the autoscaling bound, used/allocatable, headroom
		"gpu   1 (max 2)  a2-highgpu-8g",
		"8/8", "4.55/96", "20.1Gi/680Gi", "0 GPU, 91.45 CPU, 659.9Gi",
		"2.5/16", "16Gi/64Gi", "13.5 CPU, 48Gi",
		// workloads: counts and where
		"StatefulSet/tower               2     1       1        8 GPU, 4.5 CPU, 20Gi  gpu-0",
		// the scheduler's own reason, verbatim
		"StatefulSet/tower tower-1: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.",
		"kolotoc:nodePools[0].nodes: 1 → 2 (maxNodes 2 allows it",
		"kolotoc:towers.count: 2 → 1",
		"DOES NOT FIT: 1 of 4 pods not placed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FITS:") {
		t.Errorf("report says FITS:\n%s", out)
	}
}

func TestReportFits(t *testing.T) {
	r := shortReport()
	r.Pods[1].Node, r.Pods[1].Reason = "fit-short-gpu-1", ""
	r.Pools[0].Nodes = 2
	if !r.Fits() || r.ExitCode() != 0 {
		t.Fatalf("every pod placed: Fits %v, exit %d; want true, 0", r.Fits(), r.ExitCode())
	}
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, want := range []string{"gpu-{0..1}", "FITS: all 4 pods placed on 3 nodes (deployed in 8.3s, scheduled in 200ms)."} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"Not placed", "What would make it fit", "DOES NOT FIT", "Placement and fabric"} {
		if strings.Contains(out, not) {
			t.Errorf("report of a stack that fits says %q:\n%s", not, out)
		}
	}
}

// TestReportPlacement: a pool whose nodes carry a zone and a fabric is reported with them: the
// one zone of a compact pool, the interfaces per node and how many the towers took.
func TestReportPlacement(t *testing.T) {
	r := shortReport()
	r.Pools[0].Zones, r.Pools[0].Fabric, r.Pools[0].FabricPerNode, r.Pools[0].FabricRequested = []string{"us-east-1a"}, "efa", 4, 4
	r.Pools[1].Zones = []string{"us-east-1a", "us-east-1b"}
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, want := range []string{
		"Placement and fabric",
		"  gpu: one zone (us-east-1a); fabric efa: 4 vpc.amazonaws.com/efa per node, 4/4 requested",
		"  cpu: 2 zones (us-east-1a, us-east-1b); no fabric",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestReportNotFitting: a refused configuration, an undecided pod, a controller that did not
// create its pods and an empty stack are each "does not fit".
func TestReportNotFitting(t *testing.T) {
	for name, r := range map[string]*Report{
		"refused":   {Refused: "stack \"fit-x\": 1 configuration problem(s)"},
		"undecided": {Pods: []Pod{{Name: "a", Undecided: true}}},
		"missing":   {Pods: []Pod{{Name: "a", Node: "n"}}, Missing: []Missing{{Workload: "StatefulSet/b", Created: 1, Wanted: 2}}},
		"no pods":   {},
	} {
		if r.Fits() || r.ExitCode() != 1 {
			t.Errorf("%s: Fits %v, exit %d; want false, 1", name, r.Fits(), r.ExitCode())
		}
	}
	var b strings.Builder
	(&Report{Stack: "x", Refused: "stack \"fit-x\": 1 configuration problem(s); nothing was changed:\n  - kolotoc:towers.count = 3: allowed: 1..2"}).Write(&b)
	if out := b.String(); !strings.Contains(out, "    - kolotoc:towers.count = 3") || !strings.Contains(out, "DOES NOT FIT: the program refuses") {
		t.Errorf("refusal report:\n%s", out)
	}
	b.Reset()
	(&Report{Pods: []Pod{{Name: "tower-0", Workload: "StatefulSet/tower", Undecided: true}}}).Write(&b)
	if out := b.String(); !strings.Contains(out, "tower-0: not decided by the scheduler before the wait ended") {
		t.Errorf("undecided pod:\n%s", out)
	}
}

// TestReportOvercommitted: kwok completes a Job's pods at once, so the scheduler may fill the room
// a launcher holds on a cloud; a node whose pods together ask more than it has does not fit.
func TestReportOvercommitted(t *testing.T) {
	r := shortReport()
	r.Pods[1].Node, r.Pods[1].Reason = "fit-short-gpu-1", ""
	r.Overcommitted = []Overcommit{{Node: "fit-short-cpu-0", Used: Resources{MilliCPU: 16500, Memory: 20 * gi}, Allocatable: n2}}
	if r.Fits() {
		t.Fatal("an over-committed node fits")
	}
	var b strings.Builder
	r.Write(&b)
	for _, want := range []string{"Over-committed once every pod runs", "cpu-0: asked 16.5 CPU, 20Gi of 16 CPU, 64Gi allocatable", "DOES NOT FIT: 1 node(s) over-committed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestCompressNodes(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"gpu-0"}, "gpu-0"},
		{[]string{"gpu-3", "gpu-1", "gpu-0", "gpu-2"}, "gpu-{0..3}"},
		{[]string{"cpu-0", "cpu-0", "cpu-1"}, "cpu-0 ×2, cpu-1"},
		{[]string{"gpu-0", "gpu-2", "cpu-0", "cpu-1", "cpu-0", "cpu-1"}, "cpu-{0..1} ×2, gpu-0, gpu-2"},
		{[]string{"gpu-9", "gpu-10", "kolotoc-node"}, "gpu-{9..10}, kolotoc-node"},
	} {
		if got := compressNodes(tc.in); got != tc.want {
			t.Errorf("compressNodes(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[int64]string{512 << 20: "512Mi", 16 * gi: "16Gi", 20*gi + 64<<20: "20.1Gi", 5440 * gi: "5.3Ti", -3 * gi: "-3Gi", 100: "100"} {
		if got := mem(in); got != want {
			t.Errorf("mem(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int64]string{4000: "4", 500: "0.5", 33250: "33.25", 50: "0.05"} {
		if got := cpus(in); got != want {
			t.Errorf("cpus(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestReportQueue: a queued ring that Kueue did not admit does not fit, whatever the scheduler
// would have done with its pods (it never saw them), and the report gives Kueue's reason.
func TestReportQueue(t *testing.T) {
	r := shortReport()
	r.Pods = r.Pods[:1] // the one placed tower
	r.Missing = nil
	r.Queue = []Admission{{Workload: "tower", Queue: "kolotoc", ClusterQueue: "kolotoc-fit-short", Admitted: true}}
	var b strings.Builder
	r.Write(&b)
	if !strings.Contains(b.String(), "tower: admitted by ClusterQueue kolotoc-fit-short") {
		t.Errorf("admitted ring not reported:\n%s", b.String())
	}
	r.Queue[0] = Admission{Workload: "tower", Queue: "kolotoc", Message: "couldn't assign flavors to pod set towers: insufficient quota for nvidia.com/gpu"}
	b.Reset()
	r.Write(&b)
	if r.Fits() || !strings.Contains(b.String(), "tower: NOT admitted (LocalQueue kolotoc), every pod held: couldn't assign flavors") {
		t.Errorf("held ring: fits %v, report:\n%s", r.Fits(), b.String())
	}
}
