//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The label Karpenter puts on every node it makes: its NodePool (<cluster>-<pool>).
const karpenterPoolLabel = "karpenter.sh/nodepool"

// atZero is a simulated stack whose GPU pool sits at zero nodes and grows through the local
// cluster's Karpenter (testbed/cluster/cluster.sh starts it, with the catalogue's instance types):
// nodes of a2-highgpu-8g (8 × A100, 96 vCPUs, 680Gi) in us-central1-b, at most 2 (so the
// stack's ClusterQueue holds 16 GPUs), given back 5 s after their last pod leaves. The CPU pool stays fixed. The ring is queued through Kueue.
func atZero(run string, count int, extra map[string]any) map[string]any {
	o := map[string]any{
		"nodePools": []any{
			map[string]any{"name": "gpu", "machineType": "a2-highgpu-8g", "minNodes": 0, "maxNodes": 2,
				"zones": []any{"us-central1-b"}, "scaleDownAfter": "5s"},
			map[string]any{"name": "cpu", "machineType": "n2-standard-16"},
		},
		"queue":      map[string]any{"type": "kueue"},
		"towers":     map[string]any{"count": count, "gpusPerTower": 8, "pool": "gpu", "run": run, "onSuccess": "release"},
		"carriers":   map[string]any{"enabled": false},
		"sentinels":  map[string]any{"enabled": false},
		"entrypoint": map[string]any{"jupyter": false, "tensorboard": false, "daskDashboard": false},
	}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

// poolNodes are the nodes Karpenter made for the stack's pool.
func poolNodes(t *testing.T, s *stack, pool string) []corev1.Node {
	t.Helper()
	nodes, err := s.kube.CoreV1().Nodes().List(context.Background(), listOpts(karpenterPoolLabel+"="+pool))
	if err != nil {
		t.Fatal(err)
	}
	return nodes.Items
}

// releaseTowers does the launcher's release step (onSuccess: release) with the launcher's own
// release account: on kwok nodes nothing runs, so the test scales the towers to zero as the
// launcher's release.py does (see TestQueueGangAdmission).
func releaseTowers(t *testing.T, ns string) {
	t.Helper()
	_, restCfg := localCluster(t)
	as := rest.CopyConfig(restCfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":launcher-release"}
	release, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := release.AppsV1().StatefulSets(ns).Patch(context.Background(), "tower", types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// TestGPUPoolFromZero: a GPU pool at zero costs no node until a run needs one. `pulumi up` of a
// run → Kueue admits the ring → Karpenter makes exactly the nodes the ring needs (2 × 8 GPUs:
// two nodes of the pool's machine type, labels, taints and zone) → every tower runs → the
// launcher succeeds → the release scales the towers to zero → the emptied nodes are gone within
// the pool's scaleDownAfter (and Karpenter's consolidation pass) → a second run brings them back.
// Beside it, a stack whose ring does not fit the queue's quota while the first run holds it gets
// no node and no bound pod while it waits.
func TestGPUPoolFromZero(t *testing.T) {
	suffix := randomHex(t, 3)
	aName := "za-" + suffix
	aNS, aPool := "kolotoc-"+aName, "kolotoc-"+aName+"-gpu"
	a := newStack(t, aName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", atZero("r1", 2, nil))

	start := time.Now()
	a.up()
	upTook := time.Since(start)
	if n := poolNodes(t, a, aPool); len(n) > 2 {
		t.Fatalf("%d nodes of pool %s right after up: want at most the ring's 2", len(n), aPool)
	}
	var ready time.Duration
	waitFor(t, "the ring admitted, two GPU nodes made for it, every tower running", 3*time.Minute, func() (bool, string) {
		w := workload(t, a, aNS, "tower-r1")
		pods := podsOf(t, a, aNS)
		nodes := poolNodes(t, a, aPool)
		ready = time.Since(start)
		return w.admitted() && len(nodes) == 2 && len(pods) == 2 && pods.running() == 2,
			fmt.Sprintf("workload %s; %d nodes; %d tower pods, %d running", w, len(nodes), len(pods), pods.running())
	})
	t.Logf("up returned in %s; towers running on new nodes %s after the up began", upTook.Round(100*time.Millisecond), ready.Round(100*time.Millisecond))

	nodes := poolNodes(t, a, aPool)
	onNodes := map[string]bool{}
	for _, n := range nodes {
		onNodes[n.Name] = true
		l := n.Labels
		for k, want := range map[string]string{
			"node.kubernetes.io/instance-type": "a2-highgpu-8g", "topology.kubernetes.io/zone": "us-central1-b",
			"karpenter.sh/capacity-type": "on-demand", "kolotoc.dev/pool": "gpu", "nvidia.com/gpu.present": "true",
			"nvidia.com/gpu.product": "nvidia-tesla-a100",
		} {
			if l[k] != want {
				t.Errorf("node %s: label %s=%q, want %q", n.Name, k, l[k], want)
			}
		}
		tainted := false
		for _, tn := range n.Spec.Taints {
			if tn.Key == "nvidia.com/gpu" && tn.Value == "present" && tn.Effect == corev1.TaintEffectNoSchedule {
				tainted = true
			}
			if tn.Key == "karpenter.sh/unregistered" {
				t.Errorf("node %s still carries Karpenter's unregistered taint", n.Name)
			}
		}
		if !tainted {
			t.Errorf("node %s: taints %v, want nvidia.com/gpu=present:NoSchedule", n.Name, n.Spec.Taints)
		}
		if g := n.Status.Allocatable["nvidia.com/gpu"]; g.String() != "8" {
			t.Errorf("node %s: allocatable nvidia.com/gpu %s, want 8", n.Name, g.String())
		}
	}
	for _, p := range podsOf(t, a, aNS) {
		if !onNodes[p.Spec.NodeName] {
			t.Errorf("tower %s on %s, not on a node made for the pool (%v)", p.Name, p.Spec.NodeName, onNodes)
		}
		if p.Annotations["karpenter.sh/do-not-disrupt"] != "true" || p.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" {
			t.Errorf("tower %s: annotations %v, want karpenter.sh/do-not-disrupt=true and safe-to-evict=false (its node is never taken mid-run)", p.Name, p.Annotations)
		}
	}
	a.waitJob(t, aNS, "launcher", 2*time.Minute)

	// The stack's outputs show the pool's bounds.
	pools, _ := a.outputs()["poolBounds"].(map[string]any)
	if gpu, _ := pools["gpu"].(map[string]any); fmt.Sprint(gpu["minNodes"], gpu["maxNodes"], gpu["autoscaled"]) != "0 2 true" {
		t.Errorf("output poolBounds.gpu = %v, want minNodes 0, maxNodes 2, autoscaled true", pools["gpu"])
	}

	// B: a ring of its own pool at zero, on A's ClusterQueue, whose quota A's run holds.
	bName := "zb-" + suffix
	bNS, bPool := "kolotoc-"+bName, "kolotoc-"+bName+"-gpu"
	b := newStack(t, bName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", atZero("r1", 1, map[string]any{
		"queue": map[string]any{"type": "kueue", "clusterQueue": aNS},
	}))
	b.up()
	waitFor(t, "B's ring held", 2*time.Minute, func() (bool, string) {
		w := workload(t, b, bNS, "tower-r1")
		all := allQueued(t, b, bNS)
		return w.exists() && !w.admitted() && len(all) == 2 && all.gated() == 2,
			fmt.Sprintf("workload %s; %d queued pods, %d gated", w, len(all), all.gated())
	})
	time.Sleep(15 * time.Second) // longer than Karpenter's batch window (10 s at most)
	if n := poolNodes(t, b, bPool); len(n) != 0 {
		t.Errorf("B's pool has %d nodes while its ring waits for quota, want none", len(n))
	}
	if all := allQueued(t, b, bNS); all.bound() != 0 {
		t.Errorf("B held: %d of its pods bound, want none", all.bound())
	}
	b.cleanup()

	// A's run ends: the towers go, and so do their nodes.
	released := time.Now()
	releaseTowers(t, aNS)
	waitFor(t, "A's GPU nodes given back", 3*time.Minute, func() (bool, string) {
		n := poolNodes(t, a, aPool)
		return len(n) == 0, fmt.Sprintf("%d nodes left", len(n))
	})
	t.Logf("zero GPU nodes %s after the release (scaleDownAfter 5s)", time.Since(released).Round(100*time.Millisecond))

	// A second run brings them back.
	a.reconfigure("examples/gpu-dev/Pulumi.gpu-dev.yaml", atZero("r2", 2, nil))
	start = time.Now()
	a.up()
	waitFor(t, "the second run's nodes and towers", 3*time.Minute, func() (bool, string) {
		pods := podsOf(t, a, aNS)
		nodes := poolNodes(t, a, aPool)
		return len(nodes) == 2 && len(pods) == 2 && pods.running() == 2,
			fmt.Sprintf("%d nodes; %d tower pods, %d running", len(nodes), len(pods), pods.running())
	})
	t.Logf("second run: towers running on new nodes %s after its up began", time.Since(start).Round(100*time.Millisecond))
	if job := a.waitJob(t, aNS, "launcher", 2*time.Minute); job.Status.Succeeded == 0 {
		t.Errorf("the second run's launcher did not succeed: %+v", job.Status)
	}
}
