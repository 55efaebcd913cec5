package main

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kolotoc/components/cluster/simapi"
)

func testPool(nodes int, gen int64) *Pool {
	p := &Pool{ObjectMeta: metav1.ObjectMeta{Name: "c-gpu", UID: types.UID("pool-uid"), Generation: gen}, Spec: PoolSpec{Nodes: nodes}}
	p.Spec.Template.Metadata.Labels = map[string]string{"kolotoc.dev/pool": "gpu"}
	p.Spec.Template.Metadata.Annotations = map[string]string{simapi.KwokNodeAnnotation: "fake"}
	p.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	return p
}

// made is node i as the controller would have made it for p, Ready or not.
func made(p *Pool, i int, ready bool) *corev1.Node {
	n := desiredNode(p, i)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	return n
}

func nodes(ns ...*corev1.Node) map[string]*corev1.Node {
	m := map[string]*corev1.Node{}
	for _, n := range ns {
		m[n.Name] = n
	}
	return m
}

func TestDesiredNode(t *testing.T) {
	n := desiredNode(testPool(2, 3), 1)
	if n.Name != "c-gpu-1" || n.Labels["kubernetes.io/hostname"] != "c-gpu-1" || n.Labels[simapi.PoolLabel] != "c-gpu" || n.Labels["kolotoc.dev/pool"] != "gpu" {
		t.Errorf("name/labels: %s %v", n.Name, n.Labels)
	}
	if n.Annotations[simapi.GenerationAnnotation] != "3" || n.Annotations[simapi.KwokNodeAnnotation] != "fake" {
		t.Errorf("annotations: %v", n.Annotations)
	}
	ref := metav1.GetControllerOf(n)
	if ref == nil || ref.UID != "pool-uid" || ref.Kind != simapi.Kind || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("owner: %+v (the garbage collector deletes the nodes with their pool only through it)", ref)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "nvidia.com/gpu" {
		t.Errorf("taints: %v", n.Spec.Taints)
	}
	body, err := applyBody(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"status"`, `"creationTimestamp"`} {
		if contains(body, s) {
			t.Errorf("apply body carries %s (the kubelet's, or empty): %s", s, body)
		}
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestPlan(t *testing.T) {
	p := testPool(3, 2)
	old := testPool(3, 1)
	other := testPool(1, 1)
	other.Name, other.UID = "c-gpu", "someone-else"
	stranger := made(other, 0, true) // same name, another controller
	bigger := made(p, 2, true)       // an older shape with other hardware
	bigger.Annotations = map[string]string{simapi.CapacityAnnotation: `{"nvidia.com/gpu":"8"}`, simapi.GenerationAnnotation: "1"}
	unowned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c-gpu-0"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, tc := range []struct {
		name   string
		have   map[string]*corev1.Node
		apply  []int
		delete []string
		ready  int
		status metav1.ConditionStatus
		reason string
	}{
		{"empty: make all", nodes(), []int{0, 1, 2}, nil, 0, metav1.ConditionFalse, "NodesNotReady"},
		{"all current and Ready", nodes(made(p, 0, true), made(p, 1, true), made(p, 2, true)), nil, nil, 3, metav1.ConditionTrue, "NodesReady"},
		{"one not Ready yet", nodes(made(p, 0, true), made(p, 1, false), made(p, 2, true)), nil, nil, 2, metav1.ConditionFalse, "NodesNotReady"},
		// A spec change (new generation) brings every node to the new shape; until then the
		// pool is not Ready, whatever kwok says of the nodes.
		{"older generation", nodes(made(old, 0, true), made(p, 1, true), made(p, 2, true)), []int{0}, nil, 2, metav1.ConditionFalse, "NodesNotReady"},
		{"scaled down", nodes(made(p, 0, true), made(p, 1, true), made(p, 2, true), made(p, 3, true), made(p, 10, true)), nil, []string{"c-gpu-10", "c-gpu-3"}, 3, metav1.ConditionFalse, "NodesNotReady"},
		// Another capacity is another machine: deleted, then made again once gone.
		{"capacity changed", nodes(made(p, 0, true), made(p, 1, true), bigger), nil, []string{"c-gpu-2"}, 2, metav1.ConditionFalse, "NodesNotReady"},
		// A Node the stack registered itself before pools existed: adopted, not recreated.
		{"adopts an unowned node", nodes(unowned, made(p, 1, true), made(p, 2, true)), []int{0}, nil, 2, metav1.ConditionFalse, "NodesNotReady"},
		{"leaves another controller's node", nodes(stranger, made(p, 1, true), made(p, 2, true)), nil, nil, 2, metav1.ConditionFalse, "NameTaken"},
	} {
		pl := makePlan(p, tc.have)
		if !slices.Equal(pl.apply, tc.apply) || !slices.Equal(pl.delete, tc.delete) {
			t.Errorf("%s: apply %v delete %v, want %v %v", tc.name, pl.apply, pl.delete, tc.apply, tc.delete)
		}
		c := pl.status.Conditions[0]
		if pl.status.ReadyNodes != tc.ready || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 2 || pl.status.ObservedGeneration != 2 {
			t.Errorf("%s: ready %d, condition %+v; want %d %s %s at generation 2", tc.name, pl.status.ReadyNodes, c, tc.ready, tc.status, tc.reason)
		}
	}
}

func TestPlanIgnoresOtherPools(t *testing.T) {
	p := testPool(1, 1)
	q := testPool(1, 1)
	q.Name, q.UID = "c-gpu2", "q-uid" // a prefix of neither's node names is the other's
	pl := makePlan(p, nodes(made(p, 0, true), made(q, 0, true)))
	if len(pl.apply) != 0 || len(pl.delete) != 0 || pl.status.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("pool c-gpu touched pool c-gpu2's node: %+v", pl)
	}
}
