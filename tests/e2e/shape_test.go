//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// shapeOverrides trims the GPU dev layout to the towers alone (beside the entrypoint's Dask
// scheduler and the storage, which every stack has) on its pool of exactly 2 simulated nodes × 8
// GPUs, with towers of the given shape.
func shapeOverrides(towers, gpus int) map[string]any {
	return map[string]any{
		"towers":       map[string]any{"count": towers, "gpusPerTower": gpus, "pool": "gpu"},
		"carriers":     map[string]any{"enabled": false},
		"sentinels":    map[string]any{"enabled": false},
		"devicePlugin": map[string]any{"enabled": false},
		"entrypoint":   map[string]any{"pool": "cpu", "jupyter": false, "tensorboard": false, "daskDashboard": false},
	}
}

// TestTowerShapeChange changes the towers' shape on a full GPU pool: 2 × 8 GPUs on 2 nodes of 8,
// then 4 × 4, then back. A rolling update of the StatefulSet would stay stuck for good (the new
// towers Pending for lack of GPUs while the old ones hold them, the controller waiting for them
// to be Ready); the ring is replaced as a whole instead, under the same names. A plain scale
// stays an in-place update.
func TestTowerShapeChange(t *testing.T) {
	t.Parallel() // see doc.go
	s := newStack(t, "e2e-shape", gpuDev, shapeOverrides(2, 8))
	ns := "kolotoc-" + s.name

	start := time.Now()
	s.up()
	t.Logf("2 × 8 up in %s", time.Since(start).Round(time.Second))
	s.assertTowers(t, ns, 2, 8)

	reshape := func(t *testing.T, towers, gpus int) {
		s := s.sub(t)
		s.reconfigure(gpuDev, shapeOverrides(towers, gpus))
		steps, _ := s.preview()
		if op := steps["kubernetes:apps/v1:StatefulSet::towers"]; !strings.Contains(op, "replace") {
			t.Errorf("preview of %d × %d: StatefulSet towers %q, want a replacement (all steps: %s)", towers, gpus, op, fmtMap(steps))
		}
		start := time.Now()
		if r := s.run("", "up", "--yes", "--skip-preview"); r.code != 0 {
			t.Fatalf("pulumi up to %d × %d failed after %s (exit %d); towers: %s\n%s",
				towers, gpus, time.Since(start).Round(time.Second), r.code, s.towerPods(t, ns), tail(r.stdout+r.stderr))
		}
		t.Logf("%d × %d up in %s", towers, gpus, time.Since(start).Round(time.Second))
		s.assertTowers(t, ns, towers, gpus)
	}

	t.Run("2x8 to 4x4 replaces the ring", func(t *testing.T) { reshape(t, 4, 4) })

	t.Run("a plain scale stays in place", func(t *testing.T) {
		s := s.sub(t)
		s.reconfigure(gpuDev, shapeOverrides(3, 4))
		steps, _ := s.preview()
		if op := steps["kubernetes:apps/v1:StatefulSet::towers"]; op != "update" {
			t.Errorf("preview of 3 × 4: StatefulSet towers %q, want update (all steps: %s)", op, fmtMap(steps))
		}
	})

	t.Run("back to 2x8 replaces it again", func(t *testing.T) { reshape(t, 2, 8) })
}

// towerPods describes every tower pod: name, phase and why it is not scheduled.
func (s *stack) towerPods(t *testing.T, ns string) string {
	pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts("app.kubernetes.io/component=tower"))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		d := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != "True" && c.Message != "" {
				d += fmt.Sprintf(" (%s: %s)", c.Type, c.Message)
			}
		}
		if len(p.Spec.Containers) > 0 {
			gpus := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]
			d += " gpus=" + gpus.String()
		}
		out = append(out, d)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
