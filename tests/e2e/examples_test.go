//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"os"
)

// protected reports whether a stack file sets kolotoc:storage.protect.
func protected(t *testing.T, base string) bool {
	t.Helper()
	b, err := os.ReadFile(stackFile(base))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	st, _ := doc.Config["kolotoc:storage"].(map[string]any)
	return st["protect"] == true
}

// TestExamplesOnTheSimulatedCloud deploys every cloud stack file with `cloud: simulated`: its
// pools are mirrored node for node from the machine-type catalogue, and every pod it asks for
// must be scheduled and Ready — the check design.md promises before paying for a single GPU.
func TestExamplesOnTheSimulatedCloud(t *testing.T) {
	t.Parallel() // see doc.go
	for _, ex := range []struct{ name, file string }{
		{"prod", "prod"},
		{"aws", "examples/aws/Pulumi.aws.yaml"},
		{"azure", "examples/azure/Pulumi.azure.yaml"},
	} {
		t.Run(ex.name, func(t *testing.T) {
			s := newStack(t, "e2e-"+ex.name, ex.file, map[string]any{"cloud": "simulated"})
			start := time.Now()
			s.up()
			t.Logf("%s on the simulated cloud: up in %s", ex.name, time.Since(start).Round(time.Second))
			s.assertAllPodsRunning(t, "kolotoc-"+s.name)
			if protected(t, ex.file) {
				// Checkpoints are kept: destroy refuses while the storage is protected, and
				// says so; unprotecting is the explicit step that lets it go.
				r := s.run("", "destroy", "--yes", "--skip-preview")
				if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "protected") {
					t.Fatalf("destroy of protected storage: exit %d\n%s", r.code, tail(r.stdout+r.stderr))
				}
				pvc, err := s.kube.CoreV1().PersistentVolumeClaims("kolotoc-"+s.name).Get(context.Background(), "shared", metav1.GetOptions{})
				if err != nil || pvc.DeletionTimestamp != nil {
					t.Fatalf("the protected claim did not survive destroy: %v", err)
				}
				s.pulumi("state", "unprotect", "--all", "--yes")
			}
			s.pulumi("destroy", "--yes", "--skip-preview")
			s.assertGone(t, "kolotoc-"+s.name)
		})
	}
}

// assertAllPodsRunning: every pod of the namespace is scheduled and Ready (or, for Job pods,
// Succeeded); a Pending pod fails the test with the scheduler's reason.
func (s *stack) assertAllPodsRunning(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	var pending []string
	waitFor(t, "every pod scheduled and ready", 2*time.Minute, func() (bool, string) {
		pods, err := s.kube.CoreV1().Pods(ns).List(ctx, listOpts(""))
		if err != nil {
			return false, err.Error()
		}
		pending = pending[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || podReady(&p) {
				continue
			}
			reason := string(p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
					reason = c.Message
				}
			}
			pending = append(pending, fmt.Sprintf("%s (%s)", p.Name, reason))
		}
		return len(pods.Items) > 0 && len(pending) == 0, fmt.Sprintf("%d pods, not ready: %s", len(pods.Items), strings.Join(pending, "; "))
	})
}
