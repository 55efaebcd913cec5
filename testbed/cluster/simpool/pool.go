package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kolotoc/components/cluster/simapi"
)

// Pool is a SimulatedNodePool (crd.yaml).
type Pool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PoolSpec   `json:"spec"`
	Status            PoolStatus `json:"status,omitempty"`
}

// PoolSpec says how many nodes, and what each carries.
type PoolSpec struct {
	Nodes    int          `json:"nodes"`
	Template NodeTemplate `json:"template,omitempty"`
}

// NodeTemplate is what every node of the pool carries.
type NodeTemplate struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata,omitempty"`
	Spec struct {
		Taints []corev1.Taint `json:"taints,omitempty"`
	} `json:"spec,omitempty"`
}

// PoolStatus is what the controller reports.
type PoolStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Nodes              int                `json:"nodes"`
	ReadyNodes         int                `json:"readyNodes"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// desiredNode is the i-th node of the pool as the controller applies it (server-side apply: the
// fields set here are the controller's; a field it stops setting is removed).
func desiredNode(p *Pool, i int) *corev1.Node {
	name := simapi.NodeName(p.Name, i)
	labels := maps.Clone(p.Spec.Template.Metadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// What a kubelet sets on its own node; the pool's label is the controller's bookkeeping.
	labels["kubernetes.io/hostname"] = name
	labels[simapi.PoolLabel] = p.Name
	annotations := maps.Clone(p.Spec.Template.Metadata.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[simapi.GenerationAnnotation] = strconv.FormatInt(p.Generation, 10)
	yes := true
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: simapi.APIVersion, Kind: simapi.Kind, Name: p.Name, UID: p.UID,
				Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: corev1.NodeSpec{Taints: slices.Clone(p.Spec.Template.Spec.Taints)},
	}
}

// plan is what one reconcile of a pool does.
type plan struct {
	apply  []int    // indexes of nodes to create or bring to the pool's generation
	delete []string // nodes of the pool beyond its size, or whose capacity changed (made again)
	status PoolStatus
}

// ownedBy: the node's controller is this pool (by UID: a pool deleted and made again under the
// same name owns nothing of the old one's until it adopts it).
func ownedBy(n *corev1.Node, p *Pool) bool {
	ref := metav1.GetControllerOf(n)
	return ref != nil && ref.UID == p.UID
}

// current: the node is the pool's and matches its generation.
func current(n *corev1.Node, p *Pool) bool {
	return ownedBy(n, p) && n.Annotations[simapi.GenerationAnnotation] == strconv.FormatInt(p.Generation, 10)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// makePlan compares a pool with the nodes that exist: byName holds every Node of the cluster
// that is named like one of the pool's or labelled as the pool's.
//
// A node named like one of the pool's that no other controller owns is adopted: that is how the
// Nodes a stack registered itself, before pools, pass to the pool without being recreated. A node
// another controller owns is left alone and reported.
func makePlan(p *Pool, byName map[string]*corev1.Node) plan {
	var pl plan
	pl.status.ObservedGeneration = p.Generation
	var foreign []string
	for i := 0; i < p.Spec.Nodes; i++ {
		n, ok := byName[simapi.NodeName(p.Name, i)]
		switch {
		case !ok:
			pl.apply = append(pl.apply, i)
		case n.DeletionTimestamp != nil:
			// Going: made again once it is gone (the node's deletion is an event).
		case metav1.GetControllerOf(n) != nil && !ownedBy(n, p):
			foreign = append(foreign, n.Name)
		case n.Annotations[simapi.CapacityAnnotation] != p.Spec.Template.Metadata.Annotations[simapi.CapacityAnnotation]:
			// A node's capacity is its hardware: kwok reports it once, when the node comes up
			// (testbed/cluster/kwokctl.yaml). Another shape is another machine, as on a cloud, where a new
			// machine type replaces the pool's nodes: deleted here, made again once gone.
			pl.delete = append(pl.delete, n.Name)
		case !current(n, p):
			pl.apply = append(pl.apply, i)
		default:
			pl.status.Nodes++
			if nodeReady(n) {
				pl.status.ReadyNodes++
			}
		}
	}
	for name, n := range byName {
		if ownedBy(n, p) && !inPool(p, name) && n.DeletionTimestamp == nil {
			pl.delete = append(pl.delete, name)
		}
	}
	slices.Sort(pl.delete)

	cond := metav1.Condition{Type: simapi.ReadyCondition, ObservedGeneration: p.Generation}
	switch {
	case len(foreign) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, "NameTaken"
		cond.Message = fmt.Sprintf("%d node name(s) of this pool belong to another controller: %v", len(foreign), foreign)
	case pl.status.ReadyNodes == p.Spec.Nodes && len(pl.delete) == 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "NodesReady"
		cond.Message = fmt.Sprintf("%d/%d nodes Ready", pl.status.ReadyNodes, p.Spec.Nodes)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, "NodesNotReady"
		cond.Message = fmt.Sprintf("%d/%d nodes Ready, %d at this generation, %d to remove",
			pl.status.ReadyNodes, p.Spec.Nodes, pl.status.Nodes, len(pl.delete))
	}
	pl.status.Conditions = []metav1.Condition{cond}
	return pl
}

// inPool: name is one of the pool's node names at its current size.
func inPool(p *Pool, name string) bool {
	suffix, ok := strings.CutPrefix(name, p.Name+"-")
	i, err := strconv.Atoi(suffix)
	return ok && err == nil && i >= 0 && i < p.Spec.Nodes && simapi.NodeName(p.Name, i) == name
}

// sameStatus: nothing a reader would see changed (the transition time is set only on a change).
func sameStatus(a, b PoolStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Nodes != b.Nodes || a.ReadyNodes != b.ReadyNodes || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
