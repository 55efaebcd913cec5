//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const workloadsFile = "examples/workloads/Pulumi.workloads.yaml"

// TestWorkloads deploys elastic PyTorch with etcd rendezvous, a TensorFlow cluster and GPU
// monitoring together; every pod must be scheduled where it should be and Ready. Raising
// elastic.maxNodes must preview as the expected in-place changes only, without touching the
// running workers' pod template.
func TestWorkloads(t *testing.T) {
	t.Parallel() // see doc.go
	s := newStack(t, "e2e-workloads", workloadsFile, nil)
	ns := "kolotoc-" + s.name
	ctx := context.Background()
	start := time.Now()
	s.up()
	t.Logf("workloads up in %s", time.Since(start).Round(time.Second))
	s.assertAllPodsRunning(t, ns)

	t.Run("GPU pods on GPU nodes, the rest off them", func(t *testing.T) {
		pods, err := s.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			asks := false
			for _, c := range p.Spec.Containers {
				if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok && q.Value() > 0 {
					asks = true
				}
			}
			node, err := s.kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("pod %s: %v", p.Name, err)
			}
			onGPU := node.Labels["nvidia.com/gpu.present"] == "true"
			daemon := len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "DaemonSet"
			if asks != onGPU && !daemon {
				t.Errorf("pod %s (asks GPUs: %v) runs on node %s (GPU node: %v)", p.Name, asks, node.Name, onGPU)
			}
		}
	})

	t.Run("raising elastic.maxNodes: only the expected changes", func(t *testing.T) {
		s := s.sub(t)
		before, err := s.kube.AppsV1().StatefulSets(ns).Get(ctx, "elastic", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		elastic := configValue(t, workloadsFile, "kolotoc:elastic").(map[string]any)
		elastic["maxNodes"] = 3
		s.reconfigure(workloadsFile, map[string]any{"elastic": elastic})
		steps, _ := s.preview()
		for k, op := range steps {
			if op == "delete-replaced" || op == "create-replacement" {
				steps[k] = "replace"
			}
		}
		want := map[string]string{
			"kubernetes:apps/v1:StatefulSet::elastic": "update",
			// ConfigMap data is immutable to the Kubernetes provider: a new one replaces it.
			"kubernetes:core/v1:ConfigMap::elastic-scale": "replace",
			// The budget lets down to minNodes go: one more worker, one more that may.
			"kubernetes:policy/v1:PodDisruptionBudget::elastic": "update",
		}
		if fmtMap(steps) != fmtMap(want) {
			t.Errorf("preview steps:\n%s\nwant:\n%s", fmtMap(steps), fmtMap(want))
		}
		s.up()
		waitFor(t, "3 ready elastic workers", 2*time.Minute, func() (bool, string) {
			sts, err := s.kube.AppsV1().StatefulSets(ns).Get(ctx, "elastic", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return sts.Status.ReadyReplicas == 3, fmt.Sprintf("%d ready", sts.Status.ReadyReplicas)
		})
		after, err := s.kube.AppsV1().StatefulSets(ns).Get(ctx, "elastic", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if before.Status.UpdateRevision != after.Status.UpdateRevision {
			t.Errorf("the pod template changed (revision %s -> %s): running workers restart", before.Status.UpdateRevision, after.Status.UpdateRevision)
		}
	})

	s.pulumi("destroy", "--yes", "--skip-preview")
	s.assertGone(t, ns)
}

// configValue reads one key of a stack file.
func configValue(t *testing.T, base, key string) any {
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
	return doc.Config[key]
}
