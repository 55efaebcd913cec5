//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceTakeoverRefused: a stack whose kolotoc:namespace names one that exists and is not
// its own is refused before anything is registered, by the real provider's cluster: the
// Kubernetes provider's server-side apply would otherwise upsert the Namespace, put the stack's
// deny-all ingress over the pods there, and delete it on destroy (issue 30).
func TestNamespaceTakeoverRefused(t *testing.T) {
	t.Parallel() // see doc.go
	s := newStack(t, "e2e-takeover", gpuDev, map[string]any{"namespace": "e2e-team-vision"})
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-team-vision", Labels: map[string]string{"team": "vision"}}}
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })

	r := s.run("", "up", "--yes", "--skip-preview")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "adoptNamespace") || !strings.Contains(r.stdout+r.stderr, "exists and is not this stack's") {
		t.Fatalf("pulumi up into another team's namespace: exit %d, want a refusal naming kolotoc:adoptNamespace\n%s", r.code, tail(r.stdout+r.stderr))
	}
	got, err := s.kube.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != 2 || got.Labels["team"] != "vision" { // its own and kubernetes.io/metadata.name
		t.Errorf("the namespace's labels changed: %v", got.Labels)
	}
	if pols, err := s.kube.NetworkingV1().NetworkPolicies(ns.Name).List(ctx, metav1.ListOptions{}); err != nil || len(pols.Items) != 0 {
		t.Errorf("NetworkPolicies in the refused namespace: %d (%v)", len(pols.Items), err)
	}
	if out := s.pulumi("stack", "export"); strings.Contains(out, "kubernetes:") {
		t.Errorf("the refused up registered Kubernetes objects:\n%s", tail(out))
	}
}
