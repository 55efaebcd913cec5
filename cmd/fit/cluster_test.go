package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecided(t *testing.T) {
	cond := func(status corev1.ConditionStatus, reason string) corev1.PodStatus {
		return corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: status, Reason: reason}}}
	}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"placed", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}, true},
		{"refused", corev1.Pod{Status: cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}, true},
		{"not yet seen by the scheduler", corev1.Pod{}, false},
		{"waiting for something else", corev1.Pod{Status: cond(corev1.ConditionFalse, "SchedulingGated")}, false},
	} {
		if got := decided(&tc.pod); got != tc.want {
			t.Errorf("%s: decided %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWorkloadOf(t *testing.T) {
	yes := true
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}}}
	}
	for want, p := range map[string]*corev1.Pod{
		"StatefulSet/tower":     owned("StatefulSet", "tower", nil),
		"Deployment/entrypoint": owned("ReplicaSet", "entrypoint-5d8f7c9b6", map[string]string{"pod-template-hash": "5d8f7c9b6"}),
		"ReplicaSet/bare":       owned("ReplicaSet", "bare", nil),
		"Job/launcher":          owned("Job", "launcher", nil),
		"Pod/p":                 {ObjectMeta: metav1.ObjectMeta{Name: "p"}},
	} {
		if got := workloadOf(p); got != want {
			t.Errorf("workloadOf = %q, want %q", got, want)
		}
	}
}

func TestPodRequests(t *testing.T) {
	req := func(kv ...string) corev1.ResourceRequirements {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return corev1.ResourceRequirements{Requests: l}
	}
	always := corev1.ContainerRestartPolicyAlways
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Resources: req("nvidia.com/gpu", "8", "cpu", "4", "memory", "16Gi")},
			{Resources: req("cpu", "500m", "memory", "4Gi")}, // a sentinel beside the tower
		},
		InitContainers: []corev1.Container{
			{Resources: req("cpu", "6", "memory", "1Gi")},                             // runs alone, before: counts if larger
			{Resources: req("cpu", "100m", "memory", "64Mi"), RestartPolicy: &always}, // a sidecar: runs beside
		},
	}}
	want := Resources{GPUs: 8, MilliCPU: 6000, Memory: 20*gi + 64<<20, Pods: 1}
	if got := podRequests(p); got != want {
		t.Errorf("podRequests = %+v, want %+v", got, want)
	}
}

func TestNodeAllocatable(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		capacityAnnotation: `{"cpu":"96","memory":"680Gi","nvidia.com/gpu":"8","pods":"110"}`}}}
	if got := nodeAllocatable(n); got != a2 {
		t.Errorf("from the annotation: %+v, want %+v", got, a2)
	}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if got := nodeAllocatable(n); got != n2 {
		t.Errorf("from the status: %+v, want %+v", got, n2)
	}
}
