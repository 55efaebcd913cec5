//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kolotoc/components/cluster/simapi"
)

// TestSimulatedNodePool: the local cluster's pool controller (testbed/cluster/simpool, started by
// testbed/cluster/cluster.sh) does what the simulated cloud's stacks rely on, on the real API
// server with kwok: a pool's Nodes are made with its shape and reported Ready at its generation; a
// shape change re-applies the same Nodes (not new ones); scaling down removes the highest; a Node
// the stack registered itself before pools existed is adopted, and made again at once when the old
// Node resource's deletion removes it, so that the pod on it survives (the migration of stacks
// deployed before pools); a foreground delete of the pool deletes its Nodes first.
func TestSimulatedNodePool(t *testing.T) {
	t.Parallel() // see doc.go
	_, cfg := localCluster(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	pools := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: simapi.Group, Version: simapi.Version, Resource: simapi.Resource})
	ctx := context.Background()
	name := "e2e-simpool-" + randomHex(t, 3)
	ns := name
	t.Cleanup(func() {
		fg := metav1.DeletePropagationForeground
		_ = pools.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		for i := range 4 {
			_ = kube.CoreV1().Nodes().Delete(ctx, simapi.NodeName(name, i), metav1.DeleteOptions{})
		}
	})

	// A Node as a stack made it before pools: no owner, the pool's name scheme and shape, a pod
	// on it.
	capacity := func(gpus int) string {
		return fmt.Sprintf(`{"cpu":"8","memory":"32Gi","nvidia.com/gpu":"%d","pods":"110"}`, gpus)
	}
	stackNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        simapi.NodeName(name, 1),
		Labels:      map[string]string{"type": "kwok", "e2e": name},
		Annotations: map[string]string{simapi.KwokNodeAnnotation: "fake", simapi.CapacityAnnotation: capacity(4)},
	}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, stackNode, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-old-node", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:    stackNode.Name,
			Containers:  []corev1.Container{{Name: "c", Image: "kolotoc.local/none:0"}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
	pod, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldUID := nodeUID(t, kube, stackNode.Name)

	apply := func(nodes int, product string, gpus int) int64 {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": simapi.APIVersion, "kind": simapi.Kind,
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"nodes": int64(nodes), "template": map[string]any{
				"metadata": map[string]any{
					"labels": map[string]any{"type": "kwok", "e2e": name, "nvidia.com/gpu.product": product},
					"annotations": map[string]any{
						simapi.KwokNodeAnnotation: "fake",
						simapi.CapacityAnnotation: capacity(gpus),
					},
				},
				"spec": map[string]any{"taints": []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}}},
			}},
		}}
		body, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		force := true
		got, err := pools.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "e2e", Force: &force})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetGeneration()
	}
	ready := func(gen int64, nodes int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("pool %s Ready at generation %d", name, gen), time.Minute, func() (bool, string) {
			p, err := pools.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
			readyNodes, _, _ := unstructured.NestedInt64(p.Object, "status", "readyNodes")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == simapi.ReadyCondition {
					og, _ := m["observedGeneration"].(int64)
					return m["status"] == "True" && og == gen && readyNodes == int64(nodes), fmt.Sprint(m)
				}
			}
			return false, fmt.Sprint(conds)
		})
	}
	poolNodes := func() map[string]corev1.Node {
		t.Helper()
		l, err := kube.CoreV1().Nodes().List(ctx, listOpts(simapi.PoolLabel+"="+name))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]corev1.Node{}
		for _, n := range l.Items {
			m[n.Name] = n
		}
		return m
	}

	// Made, with the pool's shape, and adopted.
	gen := apply(3, "a100", 4)
	ready(gen, 3)
	nodes := poolNodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	for _, n := range nodes {
		gpus := n.Status.Allocatable["nvidia.com/gpu"]
		if n.Labels["nvidia.com/gpu.product"] != "a100" || n.Labels["kubernetes.io/hostname"] != n.Name ||
			len(n.Spec.Taints) != 1 || gpus.Value() != 4 {
			t.Errorf("node %s: labels %v taints %v allocatable %v", n.Name, n.Labels, n.Spec.Taints, n.Status.Allocatable)
		}
		if ref := metav1.GetControllerOf(&n); ref == nil || ref.Kind != simapi.Kind || ref.Name != name {
			t.Errorf("node %s: controller %v, want the pool", n.Name, ref)
		}
	}
	if uid := nodes[stackNode.Name].UID; uid != oldUID {
		t.Errorf("node %s was made again (uid %s, was %s): the stack's own Node must be adopted", stackNode.Name, uid, oldUID)
	}

	// The old Node resource's deletion, as `pulumi up` of a stack moving to pools does it.
	if err := kube.CoreV1().Nodes().Delete(ctx, stackNode.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted node made again", 30*time.Second, func() (bool, string) {
		n, err := kube.CoreV1().Nodes().Get(ctx, stackNode.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.UID != oldUID && nodeReady(n), fmt.Sprintf("uid %s", n.UID)
	})

	// A change of labels or taints re-applies the same Nodes.
	before := poolNodes()
	gen = apply(3, "h100", 4)
	ready(gen, 3)
	for nm, n := range poolNodes() {
		if n.UID != before[nm].UID || n.Labels["nvidia.com/gpu.product"] != "h100" {
			t.Errorf("node %s after the label change: uid %s (was %s), product %s", nm, n.UID, before[nm].UID, n.Labels["nvidia.com/gpu.product"])
		}
	}
	// Another capacity is another machine: the Nodes are made again, and report it (kwok sets a
	// node's capacity once, when it comes up: re-applying the annotation would change nothing).
	gen = apply(3, "h100", 8)
	ready(gen, 3)
	for nm, n := range poolNodes() {
		gpus := n.Status.Allocatable["nvidia.com/gpu"]
		if n.UID == before[nm].UID || gpus.Value() != 8 {
			t.Errorf("node %s after the capacity change: uid %s (was %s), %d GPUs allocatable, want a new node with 8", nm, n.UID, before[nm].UID, gpus.Value())
		}
	}

	// Scaling down removes the highest.
	gen = apply(2, "h100", 8)
	ready(gen, 2)
	waitFor(t, "node -2 removed", 30*time.Second, func() (bool, string) {
		_, err := kube.CoreV1().Nodes().Get(ctx, simapi.NodeName(name, 2), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// The pod on the node that was deleted and made again is still there once the pod garbage
	// collector has had its chance (it deletes a pod whose node has been missing 40 s, checking
	// every 20 s): the migration does not restart training.
	time.Sleep(65 * time.Second)
	if p, err := kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil {
		t.Errorf("the pod on the re-made node: %v (deleting: %v)", err, p != nil && p.DeletionTimestamp != nil)
	}

	// A foreground delete returns once the Nodes are gone, as the provider deletes.
	fg := metav1.DeletePropagationForeground
	if err := pools.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool gone", time.Minute, func() (bool, string) {
		_, err := pools.Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprint(err)
		}
		if n := poolNodes(); len(n) != 0 {
			t.Errorf("the pool is gone but %d of its nodes are not", len(n))
		}
		return true, ""
	})
}

func nodeUID(t *testing.T, kube *kubernetes.Clientset, name string) types.UID {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.UID
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
