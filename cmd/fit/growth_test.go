package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// zeroReport: two 8-GPU towers on a pool at zero (maxNodes 4) that Karpenter grew to two nodes.
func zeroReport() *Report {
	r := shortReport()
	r.Pools[0].Nodes, r.Pools[0].MaxNodes, r.Pools[0].FromZero = 2, 4, true
	r.Pools[0].Allocatable = a2.add(a2)
	r.Pods[1].Node, r.Pods[1].Reason = "fit-short-gpu-x7k2p", ""
	r.Growth = &Growth{Pools: []PoolGrowth{{Pool: "gpu", Index: 0, MachineType: "a2-highgpu-8g", GPUsPerNode: 8, MaxNodes: 4, Karpenter: true,
		GPUPods: []GPUDemand{{Who: "towers", Pods: 2, GPUs: 8, Spread: true}}, Packed: 2, Needs: 2}}}
	return r
}

// TestReportGrowth: the growth section says, per autoscaled pool, how far the stack's GPU pods grow
// it within maxNodes and how many nodes Karpenter made in the run; per queued workload its need
// against the quota; and what can never be placed makes the verdict "does not fit".
func TestReportGrowth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *Report)
		fits   bool
		want   []string
		not    []string
	}{
		{name: "grows from zero as computed", fits: true, change: func(*Report) {},
			want: []string{
				"Growth (autoscaled pools",
				"  pool gpu: grows 0 → 2 nodes of a2-highgpu-8g (max 4): towers 2×8 GPUs; Karpenter made 2 in this run",
				"gpu   2 (0..4)  a2-highgpu-8g",
				"FITS: all 4 pods placed on 3 nodes",
			},
			not: []string{"REFUSED", "packed they take"}},
		{name: "spread one tower to a node", fits: true, change: func(r *Report) {
			r.Pools[0].Nodes = 4
			r.Growth.Pools[0].GPUPods[0] = GPUDemand{Who: "towers", Pods: 4, GPUs: 4, Spread: true}
			r.Growth.Pools[0].Packed, r.Growth.Pools[0].Needs = 2, 4
		}, want: []string{"pool gpu: grows 0 → 4 nodes of a2-highgpu-8g (max 4): towers 4×4 GPUs, spread one to a node while maxNodes allows (packed they take 2); Karpenter made 4 in this run"}},
		{name: "Karpenter made other than computed", fits: true, change: func(r *Report) { r.Pools[0].Nodes = 3 },
			want: []string{"Karpenter made 3 in this run, not 2"}},
		{name: "more than maxNodes holds", fits: false, change: func(r *Report) {
			r.Growth.Pools[0].MaxNodes, r.Growth.Pools[0].GPUPods[0].Pods, r.Growth.Pools[0].Unplaced = 2, 3, 1
		}, want: []string{
			"REFUSED: 1 GPU pod(s) fit no node within maxNodes 2 (8 GPUs each); they would wait forever (kolotoc:nodePools[0].maxNodes)",
			"DOES NOT FIT: what the growth above refuses can never be placed",
		}},
		{name: "a pool autoscaled above zero: fixed in the mirror", fits: true, change: func(r *Report) {
			r.Pools[0].FromZero, r.Pools[0].Nodes = false, 1
			p := &r.Growth.Pools[0]
			p.Karpenter, p.Nodes, p.MinNodes = false, 1, 1
		}, want: []string{"pool gpu: grows 1 → 2 nodes of a2-highgpu-8g (max 4): towers 2×8 GPUs; the mirror holds the 1 node(s) it starts with (only a pool at zero grows here, by Karpenter)"},
			not: []string{"Karpenter made"}},
		{name: "an autoscaled CPU pool", fits: true, change: func(r *Report) {
			r.Growth.Pools = append(r.Growth.Pools, PoolGrowth{Pool: "cpu", Index: 1, MachineType: "n2-standard-16", MaxNodes: 3, Karpenter: true, GPUPods: []GPUDemand{}})
		}, want: []string{"pool cpu: no GPU pod to count; from 0 up to 3 nodes of n2-standard-16 for the pods that need them: Karpenter made 1 in this run"}},
		{name: "the queue within its quota", fits: true, change: func(r *Report) {
			r.Growth.Queue = []GangGrowth{{What: "the ring (2 towers)", Key: "towers.count",
				Need:  map[string]string{"nvidia.com/gpu": "16", "cpu": "9500m", "memory": "41Gi"},
				Quota: map[string]string{"nvidia.com/gpu": "32", "cpu": "400", "memory": "2784Gi"}, QuotaSource: "the sum of nodePools"}}
		}, want: []string{"queue: the ring (2 towers) asks 16 nvidia.com/gpu, 9500m cpu, 41Gi memory at once; the queue's quota: 32 nvidia.com/gpu, 400 cpu, 2784Gi memory (the sum of nodePools)"},
			not: []string{"REFUSED"}},
		{name: "a ring larger than the quota", fits: false, change: func(r *Report) {
			r.Growth.Queue = []GangGrowth{{What: "the ring (3 towers)", Key: "towers.count",
				Need: map[string]string{"nvidia.com/gpu": "24"}, Quota: map[string]string{"nvidia.com/gpu": "16"}, QuotaSource: "queue.quota"}}
		}, want: []string{"REFUSED: it needs 24 nvidia.com/gpu of the quota's 16; it would wait forever (kolotoc:towers.count)", "DOES NOT FIT"}},
		{name: "an existing ClusterQueue's quota is unknown", fits: true, change: func(r *Report) {
			r.Growth.Queue = []GangGrowth{{What: "the ring", Key: "towers.count", Need: map[string]string{"nvidia.com/gpu": "16"}}}
		}, want: []string{"the queue's quota: unknown (an existing ClusterQueue; queue.quota says it)"}},
		{name: "no growth read: no section", fits: true, change: func(r *Report) { r.Growth = nil }, not: []string{"Growth ("}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := zeroReport()
			tc.change(r)
			if r.Fits() != tc.fits || (r.ExitCode() == 0) != tc.fits {
				t.Errorf("Fits %v, exit %d; want fits %v", r.Fits(), r.ExitCode(), tc.fits)
			}
			var b strings.Builder
			r.Write(&b)
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("report says %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestParseGrowth(t *testing.T) {
	// `pulumi stack output --json fitGrowth`: the output is JSON text, printed as a JSON string.
	out := []byte(`"{\"pools\":[{\"pool\":\"gpu\",\"index\":0,\"machineType\":\"a2-highgpu-8g\",\"gpusPerNode\":8,\"nodes\":0,\"minNodes\":0,\"maxNodes\":4,\"karpenter\":true,` +
		`\"gpuPods\":[{\"who\":\"towers\",\"pods\":2,\"gpus\":8,\"pool\":\"gpu\",\"spread\":true}],\"packed\":2,\"needs\":2,\"unplaced\":0}],\"queue\":[]}"` + "\n")
	g, err := parseGrowth(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Pools) != 1 || g.Pools[0].Needs != 2 || !g.Pools[0].Karpenter || g.Pools[0].GPUPods[0].Who != "towers" || g.Pools[0].MaxNodes != 4 {
		t.Errorf("parsed %+v", g)
	}
	if _, err := parseGrowth([]byte(`{"pools":[]}`)); err == nil {
		t.Error("an object where the output's JSON string belongs was accepted")
	}
}

// TestLatestRefusals: Karpenter's last word on a pod counts: a refusal (FailedScheduling from
// karpenter), unless a nomination came after it; the scheduler's own events do not count.
func TestLatestRefusals(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+int64(s), 0)) }
	ev := func(pod, component, reason, msg string, s int) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod},
			Source: corev1.EventSource{Component: component}, Reason: reason, Message: msg, LastTimestamp: at(s)}
	}
	limit := "Failed to schedule pod, all available instance types exceed limits for nodepool: \"fit-x-gpu\""
	got := latestRefusals([]corev1.Event{
		ev("tower-2", "karpenter", "FailedScheduling", limit, 5),
		ev("tower-1", "karpenter", "FailedScheduling", limit, 1),
		ev("tower-1", "karpenter", "Nominated", "Pod should schedule on: nodeclaim/fit-x-gpu-abcde", 2),
		ev("tower-0", "default-scheduler", "FailedScheduling", "0/3 nodes are available", 1),
		ev("tower-3", "karpenter", "Nominated", "Pod should schedule on: nodeclaim/fit-x-gpu-fghij", 1),
	})
	if len(got) != 1 || got["ns/tower-2"] != limit {
		t.Errorf("refusals %v, want tower-2's alone", got)
	}
}

// TestSnapshotDecided: a pod of a pool at zero that the scheduler cannot place yet waits for
// Karpenter, until it has a node or Karpenter refuses it; other pods are decided as before.
func TestSnapshotDecided(t *testing.T) {
	unschedulable := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	pod := func(name, pool, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeSelector: map[string]string{poolLabel: pool}, NodeName: node}}
		if node == "" {
			p.Status = unschedulable
		}
		return p
	}
	s := snapshot{fromZero: map[string]bool{"gpu": true}, refused: map[string]string{"ns/tower-2": "Failed to schedule pod, …"}}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("tower-0", "gpu", "fit-x-gpu-abcde"), true},
		{pod("tower-1", "gpu", ""), false}, // Karpenter is making its node
		{pod("tower-2", "gpu", ""), true},  // Karpenter refused it
		{pod("carrier-0", "cpu", ""), true},
	} {
		if got := s.decided(tc.pod); got != tc.want {
			t.Errorf("%s: decided %v, want %v", tc.pod.Name, got, tc.want)
		}
	}
	if (snapshot{pods: []corev1.Pod{*pod("tower-1", "gpu", "")}, fromZero: s.fromZero, refused: s.refused}).complete() {
		t.Error("a snapshot with a pod waiting for Karpenter is complete")
	}
}

// TestSuggestFromZero: a pool at zero grows by itself, so the count to raise is maxNodes (never
// nodes), and only when Karpenter says its limit stopped it.
func TestSuggestFromZero(t *testing.T) {
	r := zeroReport()
	r.Pools[0].Nodes, r.Pools[0].MaxNodes = 1, 1
	r.Pods[1].Node = ""
	r.Pods[1].Reason = "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector."
	r.Pods[1].Autoscaler = "Failed to schedule pod, all available instance types exceed limits for nodepool: \"fit-short-gpu\""
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, w := range []string{
		"StatefulSet/tower tower-1: Karpenter: Failed to schedule pod, all available instance types exceed limits for nodepool",
		"pool gpu: Karpenter stopped at maxNodes 1; 1 more node(s) place the 1 pod(s) waiting: kolotoc:nodePools[0].maxNodes: 1 → 2",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "nodePools[0].nodes") {
		t.Errorf("a pool at zero is told to raise nodes:\n%s", out)
	}
	r.Pods[1].Autoscaler, r.Pods[1].AwaitsAutoscaler, r.Pods[1].Undecided = "", true, true
	b.Reset()
	r.Write(&b)
	if !strings.Contains(b.String(), "tower-1: Karpenter had neither made a node for it nor said why not when the wait ended") {
		t.Errorf("a pod still waiting for Karpenter:\n%s", b.String())
	}
}
