//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestElasticTorchrunForReal runs elastic PyTorch (kolotoc:elastic) on the real node: CPU
// workers from the local image (Debian's PyTorch 1.13, gloo), torchrun with the c10d rendezvous
// hosted by worker 0, and Kolotoc's built-in check (an all-reduce over every rank). Then the
// drills: a worker's pod is deleted mid-run and the group re-forms with it; elastic.maxNodes is
// raised with `pulumi up` and the new worker joins without the running ones being recreated.
func TestElasticTorchrunForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t)
	elastic := map[string]any{
		"enabled": true, "image": localImage(t, "torch"), "pool": "node",
		"minNodes": 1, "maxNodes": 2, "rdzvBackend": "c10d", // nodes: maxNodes
		"cpu": "200m", "memory": "1536Mi",
	}
	overrides := workloadOnly(t, "elastic", elastic)
	s := newStack(t, "e2e-elastic", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	flows := recordFlows(t, s)
	s.up()

	w := elasticWorkers{s: s, ns: ns}

	start := time.Now()
	w.waitOK(t, "both workers' all-reduce over 2 ranks", 6*time.Minute, 2, map[string]int{"elastic-0": 0, "elastic-1": 0})
	t.Logf("2 CPU workers: all-reduce over 2 ranks done %s after the update", time.Since(start).Round(time.Second))
	runsAsDevUser(t, s, ns, "elastic-0", "worker") // torchrun and its ranks, not root

	t.Run("a worker lost mid-run: the group re-forms and runs again", func(t *testing.T) {
		lost := time.Now()
		w.loseAndReform(t, "elastic-1", "elastic-0")
		t.Logf("drill: elastic-1 deleted; the group re-formed and all-reduced over 2 ranks again after %s", time.Since(lost).Round(time.Second))
	})

	t.Run("maxNodes raised with pulumi up: the new worker joins, the running ones stay", func(t *testing.T) {
		s := s.sub(t)
		uids := map[string]types.UID{"elastic-0": w.uid("elastic-0"), "elastic-1": w.uid("elastic-1")}
		elastic["maxNodes"] = 3 // and so nodes
		s.reconfigure("dev", overrides)
		grown := time.Now()
		s.up()
		w.waitOK(t, "an all-reduce over 3 ranks on every worker", 6*time.Minute, 3, map[string]int{"elastic-0": 0, "elastic-1": 0, "elastic-2": 0})
		for pod, u := range uids {
			if got := w.uid(pod); got != u {
				t.Errorf("%s was recreated by the scale-up (uid %s, was %s)", pod, got, u)
			}
		}
		t.Logf("drill: maxNodes 2 → 3; elastic-2 joined and 3 ranks all-reduced %s after the update began; elastic-0 and -1 kept", time.Since(grown).Round(time.Second))
	})

	t.Run("the NetworkPolicies admit the workers' traffic, and refuse what Kolotoc forbids", func(t *testing.T) {
		s := s.sub(t)
		worker, entry := podEnd(t, s, ns, "elastic-0"), podEnd(t, s, ns, s.podName(t, ns, "entrypoint"))
		store := worker.port(t, "rendezvous")
		checkFlows(t, s, flows, missingAllow{"elastic-peers", "elastic", "elastic"}, []flow{
			{From: entry, To: worker, Port: store},             // only the workers reach the c10d store
			{From: elsewhere(worker), To: worker, Port: store}, // nor another namespace
		})
	})
}

// elasticWorkers reads what the elastic workers of a stack's namespace report: Kolotoc's check
// logs "all-reduce ok (N)" after each all-reduce over a world of N ranks.
type elasticWorkers struct {
	s  *stack
	ns string
}

func (w elasticWorkers) logs(pod string) string {
	b, err := w.s.kube.CoreV1().Pods(w.ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
	if err != nil {
		return ""
	}
	return string(b)
}

// state is a worker's pod as one line: its phase, and each container's restarts and state.
func (w elasticWorkers) state(pod string) string {
	p, err := w.s.kube.CoreV1().Pods(w.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		return pod + ": " + err.Error()
	}
	out := fmt.Sprintf("%s (uid %s): %s", pod, p.UID, p.Status.Phase)
	for _, c := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		st := "waiting"
		switch {
		case c.State.Running != nil:
			st = "running since " + c.State.Running.StartedAt.UTC().Format(time.TimeOnly)
		case c.State.Terminated != nil:
			st = fmt.Sprintf("terminated (exit %d, %s)", c.State.Terminated.ExitCode, c.State.Terminated.Reason)
		case c.State.Waiting != nil:
			st = "waiting (" + c.State.Waiting.Reason + ")"
		}
		out += fmt.Sprintf("; %s: %s, %d restarts", c.Name, st, c.RestartCount)
	}
	return out
}

// ok counts a worker's completed all-reduces over a world of n ranks.
func (w elasticWorkers) ok(pod string, n int) int {
	return strings.Count(w.logs(pod), fmt.Sprintf("all-reduce ok (%d)", n))
}

// waitOK waits until every pod of after has more all-reduces over n ranks than after says.
func (w elasticWorkers) waitOK(t *testing.T, what string, timeout time.Duration, n int, after map[string]int) {
	t.Helper()
	waitFor(t, what, timeout, func() (bool, string) {
		var missing []string
		for pod, before := range after {
			if w.ok(pod, n) <= before {
				missing = append(missing, pod)
			}
		}
		if len(missing) == 0 {
			return true, ""
		}
		slices.Sort(missing)
		// Every worker that is behind, each with its state and log: a group that does not
		// re-form is seen from both sides (the survivor's agent and the new joiner).
		msg := "no new all-reduce over " + fmt.Sprint(n) + " ranks from " + strings.Join(missing, ", ")
		for _, pod := range missing {
			msg += "\n--- " + w.state(pod) + "\n" + tail(w.logs(pod))
		}
		return false, msg
	})
}

// loseAndReform deletes worker lost of a 2-worker group, waits until its StatefulSet has
// recreated it, and until both it and kept have all-reduced over 2 ranks again.
func (w elasticWorkers) loseAndReform(t *testing.T, lost, kept string) {
	t.Helper()
	before := map[string]int{kept: w.ok(kept, 2), lost: 0}
	old := w.uid(lost)
	if err := w.s.kube.CoreV1().Pods(w.ns).Delete(context.Background(), lost, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, lost+" recreated", 2*time.Minute, func() (bool, string) {
		u := w.uid(lost)
		return u != "" && u != old, "old pod still there"
	})
	w.waitOK(t, "the re-formed group's all-reduce over 2 ranks", 6*time.Minute, 2, before)
}

// uid is the pod's UID, empty while it does not exist.
func (w elasticWorkers) uid(pod string) types.UID {
	p, err := w.s.kube.CoreV1().Pods(w.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.UID
}
