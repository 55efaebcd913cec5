//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// quietWorkloads turn off what a GPU-pool test does not need.
var quietWorkloads = map[string]any{
	"carriers":   map[string]any{"enabled": false},
	"sentinels":  map[string]any{"enabled": false},
	"entrypoint": map[string]any{"jupyter": false, "tensorboard": false, "daskDashboard": false},
}

// withQuiet is config with quietWorkloads added.
func withQuiet(config map[string]any) map[string]any {
	for k, v := range quietWorkloads {
		if _, ok := config[k]; !ok {
			config[k] = v
		}
	}
	return config
}

// zeroPools are a GPU pool at zero that Karpenter grows to at most maxGPUNodes a2-highgpu-8g
// nodes (8 × A100 each) in us-central1-b, emptied nodes given back 20 s after their last pod
// left, and a fixed CPU pool.
func zeroPools(maxGPUNodes int) []any {
	return []any{
		map[string]any{"name": "gpu", "machineType": "a2-highgpu-8g", "minNodes": 0, "maxNodes": maxGPUNodes,
			"zones": []any{"us-central1-b"}, "scaleDownAfter": "20s"},
		map[string]any{"name": "cpu", "machineType": "n2-standard-16", "nodes": 1},
	}
}

// poolNodes are the nodes Karpenter made for a stack's pool (its NodePool, <cluster>-<pool>).
func poolNodes(t *testing.T, s *stack, pool string) []corev1.Node {
	t.Helper()
	nodes, err := s.kube.CoreV1().Nodes().List(context.Background(), listOpts("karpenter.sh/nodepool=kolotoc-"+s.name+"-"+pool))
	if err != nil {
		t.Fatal(err)
	}
	return nodes.Items
}

// releaseTowers scales a stack's towers to zero with its launcher's release account, as the
// launcher's release.py does when its run succeeds (on kwok nodes the launcher runs nothing).
func releaseTowers(t *testing.T, ns string) {
	t.Helper()
	_, cfg := localCluster(t)
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":launcher-release"}
	kube, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().StatefulSets(ns).Patch(context.Background(), "tower", types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("release of %s: %v", ns, err)
	}
}

// TestGPUPoolFromZero: capacity follows the runs, with the real Karpenter (its kwok provider) and
// the real Kueue. Stack A's GPU pool is at zero (minNodes 0, maxNodes 3, scaleDownAfter 20s).
//   - `pulumi up` of a queued ring of 2 towers × 8 GPUs: the ring is admitted, exactly the 2 nodes
//     it needs appear (machine type, the pool's labels, the GPU taint, a zone), every tower is
//     Ready on them and marked so that Karpenter will not take its node mid-run.
//   - Stack B's ring (2 × 8 GPUs, its own pool at zero) in A's ClusterQueue does not fit the
//     quota beside A's: held, it gets no node and no bound pod.
//   - A's release (onSuccess: release) gives A's nodes back within the configured time (zero GPU
//     nodes), and admits B, whose nodes then appear.
//   - B's release, then a second run of A (a new towers.run): A's nodes come back.
func TestGPUPoolFromZero(t *testing.T) {
	suffix := randomHex(t, 3)
	aName, bName := "za-"+suffix, "zb-"+suffix
	aNS, bNS := "kolotoc-"+aName, "kolotoc-"+bName
	a := newStack(t, aName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"nodePools": zeroPools(3),
		"queue":     map[string]any{"type": "kueue"},
		"towers":    map[string]any{"count": 2, "gpusPerTower": 8, "pool": "gpu", "run": "r1", "onSuccess": "release"},
	}))
	if n := len(poolNodes(t, a, "gpu")); n != 0 {
		t.Fatalf("%d nodes of A's pool before its first up", n)
	}
	start := time.Now()
	a.up()
	grow := func(s *stack, ns, what string, want int) {
		t.Helper()
		waitFor(t, what, 4*time.Minute, func() (bool, string) {
			w := setWorkload(t, s, ns, "tower")
			pods := podsOf(t, s, ns)
			ready := 0
			for _, p := range pods {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			return w.admitted() && ready == want, fmt.Sprintf("workload %s; %d of %d towers Ready (%s); %d nodes",
				w, ready, want, pods, len(poolNodes(t, s, "gpu")))
		})
		nodes := poolNodes(t, s, "gpu")
		if len(nodes) != want {
			t.Errorf("%s: %d nodes, want exactly the %d the ring needs", what, len(nodes), want)
		}
		for _, n := range nodes {
			for k, want := range map[string]string{
				"node.kubernetes.io/instance-type": "a2-highgpu-8g", "topology.kubernetes.io/zone": "us-central1-b",
				"karpenter.sh/capacity-type": "on-demand", "kolotoc.dev/pool": "gpu", "nvidia.com/gpu.present": "true",
				"nvidia.com/gpu.product": "nvidia-tesla-a100",
			} {
				if n.Labels[k] != want {
					t.Errorf("node %s: label %s=%q, want %q", n.Name, k, n.Labels[k], want)
				}
			}
			if g := n.Status.Allocatable["nvidia.com/gpu"]; g.String() != "8" {
				t.Errorf("node %s: allocatable nvidia.com/gpu %s, want 8", n.Name, g.String())
			}
			tainted := false
			for _, taint := range n.Spec.Taints {
				tainted = tainted || (taint.Key == "nvidia.com/gpu" && taint.Value == "present" && taint.Effect == corev1.TaintEffectNoSchedule)
				if taint.Key == "karpenter.sh/unregistered" {
					t.Errorf("node %s still carries Karpenter's unregistered taint", n.Name)
				}
			}
			if !tainted {
				t.Errorf("node %s: taints %v, want nvidia.com/gpu=present:NoSchedule", n.Name, n.Spec.Taints)
			}
		}
		on := map[string]bool{}
		for _, n := range nodes {
			on[n.Name] = true
		}
		for _, p := range podsOf(t, s, ns) {
			if !on[p.Spec.NodeName] || p.Annotations["karpenter.sh/do-not-disrupt"] != "true" ||
				p.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" {
				t.Errorf("tower %s on %s (annotations %v): want it on the pool's new nodes, marked karpenter.sh/do-not-disrupt=true and safe-to-evict=false (its node is never taken mid-run)",
					p.Name, p.Spec.NodeName, p.Annotations)
			}
		}
	}
	grow(a, aNS, "A's ring admitted, its nodes made, every tower Ready", 2)
	t.Logf("A: from zero to every tower Ready in %s", time.Since(start).Round(100*time.Millisecond))
	pools, _ := a.outputs()["poolBounds"].(map[string]any)
	if gpu, _ := pools["gpu"].(map[string]any); fmt.Sprint(gpu["minNodes"], gpu["maxNodes"], gpu["autoscaled"]) != "0 3 true" {
		t.Errorf("output poolBounds.gpu = %v, want minNodes 0, maxNodes 3, autoscaled true", pools["gpu"])
	}

	// B: its own pool at zero, A's ClusterQueue, whose quota (3 nodes × 8 GPUs) A's ring holds 16 of.
	b := newStack(t, bName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"nodePools": zeroPools(2),
		"queue":     map[string]any{"type": "kueue", "clusterQueue": aNS},
		"towers":    map[string]any{"count": 2, "gpusPerTower": 8, "pool": "gpu", "onSuccess": "release"},
	}))
	b.up()
	waitFor(t, "B's ring held", 2*time.Minute, func() (bool, string) {
		w := setWorkload(t, b, bNS, "tower")
		pods := podsOf(t, b, bNS)
		return w.exists() && !w.admitted() && len(pods) == 2 && pods.gated() == 2, fmt.Sprintf("workload %s; towers %s, %d gated", w, pods, pods.gated())
	})
	time.Sleep(15 * time.Second) // Karpenter batches pending pods for up to 10 s (its batch idle/max duration)
	if n, pods := len(poolNodes(t, b, "gpu")), podsOf(t, b, bNS); n != 0 || pods.bound() != 0 {
		t.Errorf("B held: %d nodes of its pool, %d of its towers bound; want none while it waits", n, pods.bound())
	}
	if n := len(poolNodes(t, a, "gpu")); n != 2 {
		t.Errorf("A's pool has %d nodes while B waits, want its ring's 2", n)
	}

	released := time.Now()
	releaseTowers(t, aNS)
	waitFor(t, "A's GPU nodes given back after its release", 3*time.Minute, func() (bool, string) {
		n := len(poolNodes(t, a, "gpu"))
		return n == 0, fmt.Sprintf("%d nodes left", n)
	})
	t.Logf("A: GPU nodes gone %s after the release (scaleDownAfter 20s)", time.Since(released).Round(100*time.Millisecond))
	if w := setWorkload(t, a, aNS, "tower"); !w.released() {
		t.Errorf("A's workload after its release: %s, want finished or gone", w)
	}
	grow(b, bNS, "B admitted after A's release, its nodes made, every tower Ready", 2)
	t.Logf("B: every tower Ready %s after A's release", time.Since(released).Round(100*time.Millisecond))

	// A second run of A, once B has released: the nodes come back.
	releaseTowers(t, bNS)
	waitFor(t, "B's GPU nodes given back", 3*time.Minute, func() (bool, string) {
		n := len(poolNodes(t, b, "gpu"))
		return n == 0, fmt.Sprintf("%d nodes left", n)
	})
	a.reconfigure("examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"nodePools": zeroPools(3),
		"queue":     map[string]any{"type": "kueue"},
		"towers":    map[string]any{"count": 2, "gpusPerTower": 8, "pool": "gpu", "run": "r2", "onSuccess": "release"},
	}))
	start = time.Now()
	a.up()
	grow(a, aNS, "A's second run admitted, its nodes back, every tower Ready", 2)
	t.Logf("A's second run: from zero to every tower Ready in %s", time.Since(start).Round(100*time.Millisecond))
	if w := setWorkload(t, a, aNS, "tower"); !strings.HasPrefix(w.name, "statefulset-tower-") {
		t.Errorf("A's second run's Workload %q: want the StatefulSet integration's", w.name)
	}
}
