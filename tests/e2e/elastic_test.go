//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
	lockRealNode(t, 800) // 3 elastic workers 200m (maxNodes raised from 2), the scheduler 200m
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

// TestElasticResumesFromCheckpoint runs the demo's data-parallel SGD (train_torch.py from the
// served repository) on two elastic CPU workers of the real node and kills one worker's training
// process mid-run: torchrun restarts the worker group (elastic.maxRestarts) and every rank
// resumes from the newest checkpoint in KOLOTOC_CHECKPOINT_DIR, not from step 0, and finishes.
func TestElasticResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 700)                // 2 elastic workers 200m, the scheduler 200m
	rdzv := "resume-" + randomHex(t, 3) // a fresh checkpoint directory: the local store outlives the stack
	elastic := map[string]any{
		"enabled": true, "image": localImage(t, "torch"), "pool": "node",
		"minNodes": 2, "maxNodes": 2, "rdzvBackend": "c10d", "rdzvId": rdzv,
		"cpu": "200m", "memory": "1536Mi",
		"command": []any{"/code/train_torch.py", "--idle"},
		"env": []any{
			map[string]any{"name": "DEMO_STEPS", "value": "400"},
			map[string]any{"name": "DEMO_STEP_SECONDS", "value": "0.05"},
		},
	}
	s := newStack(t, "e2e-resume", "dev", workloadOnly(t, "elastic", elastic))
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	s.up()
	w := elasticWorkers{s: s, ns: ns}

	stepRe := regexp.MustCompile(`train: step (\d+) `)
	waitFor(t, "elastic-0's rank 0 at step 100", 6*time.Minute, func() (bool, string) {
		for _, m := range stepRe.FindAllStringSubmatch(w.logs("elastic-0"), -1) {
			if n, _ := strconv.Atoi(m[1]); n >= 100 {
				return true, ""
			}
		}
		return false, w.state("elastic-0") + "\n" + tail(w.logs("elastic-0")) + "\n" + w.state("elastic-1") + "\n" + tail(w.logs("elastic-1"))
	})
	killed := time.Now()
	// The worker process torchrun started (python3 -u <script>), not torchrun itself; `--` ends
	// pkill's options, since the pattern starts with a dash.
	s.kubectl(t, "", "-n", ns, "exec", "elastic-1", "-c", "worker", "--", "pkill", "-KILL", "-f", "--", "-u /code/train_torch.py")
	resumed := regexp.MustCompile(`train: rank \d/2: resumed at step (\d+) from \S+ \(attempt [1-9]`)
	var at time.Duration
	waitFor(t, "both workers resumed from a checkpoint and done", 6*time.Minute, func() (bool, string) {
		l0, l1 := w.logs("elastic-0"), w.logs("elastic-1")
		m0, m1 := resumed.FindStringSubmatch(l0), resumed.FindStringSubmatch(l1)
		if m0 != nil && m1 != nil && at == 0 {
			at = time.Since(killed)
		}
		if m0 == nil || m1 == nil || !strings.Contains(l0, "train: done steps=400 ranks=2") {
			return false, w.state("elastic-0") + "\n" + tail(l0) + "\n" + w.state("elastic-1") + "\n" + tail(l1)
		}
		for _, m := range [][]string{m0, m1} {
			if n, _ := strconv.Atoi(m[1]); n == 0 {
				t.Errorf("a rank resumed at step 0: %q", m[0])
			}
		}
		t.Logf("measured: elastic-1's rank killed → both ranks resumed at step %s (seen within %s, polled)", m0[1], at.Round(100*time.Millisecond))
		return true, ""
	})
	if strings.Contains(w.logs("elastic-0"), "starting at step 0 (attempt 1") {
		t.Errorf("the restarted group started from step 0:\n%s", tail(w.logs("elastic-0")))
	}
}
