//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The training demo's pace in these tests: long enough a run (400 steps of ≥ 50 ms, over 20 s)
// to lose a rank in the middle of it, checkpoints every 50 steps.
const (
	demoSteps       = "400"
	demoStepSeconds = "0.05"
)

// demoCommand is the dev stack's launcher command with the demo's pace handed to the ranks.
var demoCommand = []any{"mpirun", "-np", "$(KOLOTOC_NP)", "--hostfile", "$(KOLOTOC_HOSTFILE)",
	"-x", "DEMO_GREETING", "-x", "KOLOTOC_CHECKPOINT_DIR", "-x", "KOLOTOC_ATTEMPT", "-x", "KOLOTOC_RUN_ID",
	"-x", "DEMO_STEPS", "-x", "DEMO_STEP_SECONDS", "python3", "/code/train.py"}

// TestRingRestartsFromCheckpoint runs the dev stack's ring (two towers on the real node, the
// demo's data-parallel SGD from the served repository) through the losses a run meets, one run
// id each, and checks the run finishes anyway from its last checkpoint with the result of a run
// that lost nothing, which the test computes itself (the same program, uninterrupted, over the
// same two towers):
//
//   - a rank's process killed: the launcher restarts the run once every tower takes ssh, it
//     resumes at a step > 0, and ends with the uninterrupted result;
//   - a tower's pod evicted, as a drain does (the Eviction API, which the towers' disruption
//     budget now admits one tower at a time): the tower passes SIGTERM to its rank, which writes a
//     checkpoint of a later step than the newest before it; the StatefulSet recreates the pod
//     and the run resumes at that step on it, with the uninterrupted result;
//   - the same ring queued (kolotoc:queue, its towers a StatefulSet Kueue admits as one unit), a
//     tower's pod deleted: re-created under the same admission (a plain pod group waited for
//     good), the run resumes from its checkpoint with the uninterrupted result; turning the
//     queue off again replaces the towers (Kueue refuses the queue label's removal in place);
//   - a run failing more often than towers.maxRestarts: the Job fails, and the printed runState
//     command says failed, the attempt count and why.
func TestRingRestartsFromCheckpoint(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 1100) // 2 towers 250m (and a replacement while one terminates), the launcher, the scheduler
	towers, _ := configValue(t, "dev", "kolotoc:towers").(map[string]any)
	towers["command"] = demoCommand
	towers["env"] = []any{
		map[string]any{"name": "DEMO_GREETING", "value": "restarts"},
		map[string]any{"name": "DEMO_STEPS", "value": demoSteps},
		map[string]any{"name": "DEMO_STEP_SECONDS", "value": demoStepSeconds},
	}
	// A fresh directory per test run: the local store outlives the stack.
	suffix := randomHex(t, 3)
	towers["run"] = "kill-" + suffix
	entry, _ := configValue(t, "dev", "kolotoc:entrypoint").(map[string]any)
	entry["jupyter"] = false
	overrides := map[string]any{
		"towers": towers, "entrypoint": entry,
		"carriers": map[string]any{"enabled": false}, "sentinels": map[string]any{"enabled": false},
	}
	s := newStack(t, "e2e-restart", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	s.up()
	// The run's state at a glance, as the stack prints it (checked after each run).
	runState, _ := s.outputs()["runState"].(string)
	r := ringRun{s: s, ns: ns}

	t.Run("a rank's process killed: one restart, resumed from the checkpoint, the uninterrupted result", func(t *testing.T) {
		s := s.sub(t)
		r.waitStep(t, 100)
		killed := time.Now()
		s.kubectl(t, "", "-n", ns, "exec", "tower-1", "-c", "tower", "--", "pkill", "-KILL", "-f", "python3 /code/train.py")
		job := s.waitJob(t, ns, "launcher", 5*time.Minute)
		logs := r.logs(t)
		if job.Status.Succeeded != 1 {
			t.Fatalf("the run did not complete after the kill: %+v\n%s", job.Status, tail(logs))
		}
		resumed := r.assertResumed(t, logs, 1)
		t.Logf("measured: a rank's process killed → training again (attempt 1's first rank resumed at step %d) in %s",
			resumed.step, resumed.at.Sub(killed).Round(100*time.Millisecond))
		r.assertResult(t, logs)
		r.assertState(t, runState, "succeeded", 1, 1)
	})

	t.Run("a tower's pod evicted (as a drain does): it checkpoints at SIGTERM, the run restarts on its replacement", func(t *testing.T) {
		s := s.sub(t)
		towers["run"] = "evict-" + suffix
		s.reconfigure("dev", overrides)
		s.up()
		r.waitStep(t, 100)
		before := r.latestStep(t)
		old := r.uid(t, "tower-1")
		evicted := time.Now()
		err := s.kube.PolicyV1().Evictions(ns).Evict(context.Background(), &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: "tower-1", Namespace: ns},
		})
		if err != nil {
			t.Fatalf("evicting tower-1 as a drain does: %v", err)
		}
		logs := r.completesOnReplacement(t, "tower-1", old, "the eviction")
		m := regexp.MustCompile(`train: rank 1: SIGTERM at step (\d+): checkpoint (\S+)`).FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("the evicted tower's rank wrote no checkpoint at SIGTERM (newest before: step %d):\n%s", before, tail(logs))
		}
		sigterm, _ := strconv.Atoi(m[1])
		if sigterm <= before {
			t.Errorf("the SIGTERM checkpoint is of step %d, not later than the newest before the eviction (%d)", sigterm, before)
		}
		resumed := r.assertResumed(t, logs, 1)
		if resumed.step < sigterm {
			t.Errorf("attempt 1 resumed at step %d, before the SIGTERM checkpoint's %d", resumed.step, sigterm)
		}
		t.Logf("measured: tower-1 evicted → its rank checkpointed step %d (newest before: %d) → training again on its replacement at step %d in %s",
			sigterm, before, resumed.step, resumed.at.Sub(evicted).Round(100*time.Millisecond))
		r.assertResult(t, logs)
		r.assertState(t, runState, "succeeded", 1, 1)
	})

	t.Run("queued: a tower's pod deleted is re-created under the same admission, and the run restarts from its checkpoint", func(t *testing.T) {
		s := s.sub(t)
		towers["run"] = "queued-" + suffix
		overrides["queue"] = map[string]any{"type": "kueue"}
		defer delete(overrides, "queue") // the next case turns the queue off again: its set is replaced
		s.reconfigure("dev", overrides)
		s.up()
		r.waitStep(t, 100)
		admitted := setWorkload(t, s, ns, "tower")
		if !admitted.admitted() {
			t.Fatalf("the queued ring runs, but its Workload is %s", admitted)
		}
		old := r.uid(t, "tower-1")
		deleted := time.Now()
		if err := s.kube.CoreV1().Pods(ns).Delete(context.Background(), "tower-1", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting tower-1: %v", err)
		}
		logs := r.completesOnReplacement(t, "tower-1", old, "tower-1's deletion (queued)")
		resumed := r.assertResumed(t, logs, 1)
		t.Logf("measured (queued): tower-1 deleted → training again on its replacement at step %d in %s",
			resumed.step, resumed.at.Sub(deleted).Round(100*time.Millisecond))
		r.assertResult(t, logs)
		if w := setWorkload(t, s, ns, "tower"); w.name != admitted.name || !w.admitted() || w.conditions["WaitingForReplacementPods"] == "True" {
			t.Errorf("after the replacement the ring's Workload is %s, want %s still admitted", w, admitted.name)
		}
	})

	t.Run("a run failing more often than towers.maxRestarts ends failed; runState says why and how often", func(t *testing.T) {
		s := s.sub(t)
		towers["run"] = "limit-" + suffix
		towers["maxRestarts"] = 1
		towers["command"] = []any{"sh", "-c", "echo attempt $KOLOTOC_ATTEMPT fails on purpose; exit 7"}
		s.reconfigure("dev", overrides)
		s.up()
		job := s.waitJob(t, ns, "launcher", 5*time.Minute)
		logs := r.logs(t)
		if job.Status.Succeeded != 0 || job.Status.Failed != 1 {
			t.Errorf("the Job: succeeded %d, failed %d pods; want it failed with its one pod (no new pod from attempt 0)\n%s",
				job.Status.Succeeded, job.Status.Failed, tail(logs))
		}
		for _, want := range []string{"attempt 0 fails on purpose", "attempt 1 fails on purpose"} {
			if !strings.Contains(logs, want) {
				t.Errorf("launcher log lacks %q:\n%s", want, tail(logs))
			}
		}
		if strings.Contains(logs, "attempt 2 fails") {
			t.Errorf("a third attempt ran past towers.maxRestarts 1:\n%s", tail(logs))
		}
		got := r.assertState(t, runState, "failed", 1, 1)
		if !strings.Contains(got, "attempt 0: exit 7") || !strings.Contains(got, "attempt 1: exit 7") {
			t.Errorf("runState does not say why:\n%s", got)
		}
	})
}

// ringRun reads a ring's run: the launcher's log and the towers' checkpoints.
type ringRun struct {
	s  *stack
	ns string
}

// logs is the launcher's log (its newest pod), with the kubelet's timestamps.
func (r ringRun) logs(t *testing.T) string {
	t.Helper()
	pod := r.s.podName(t, r.ns, "launcher")
	b, err := r.s.kube.CoreV1().Pods(r.ns).GetLogs(pod, &corev1.PodLogOptions{Container: "launcher", Timestamps: true}).Do(context.Background()).Raw()
	if err != nil {
		return ""
	}
	return string(b)
}

// completesOnReplacement waits until the StatefulSet has recreated pod (its uid no longer old)
// and the launcher's run has completed after the loss (what), and returns the launcher's log.
func (r ringRun) completesOnReplacement(t *testing.T, pod string, old types.UID, what string) string {
	t.Helper()
	waitFor(t, pod+" recreated", 3*time.Minute, func() (bool, string) {
		u := r.uid(t, pod)
		return u != "" && u != old, "the old pod is still there"
	})
	job := r.s.waitJob(t, r.ns, "launcher", 5*time.Minute)
	logs := r.logs(t)
	if job.Status.Succeeded != 1 {
		t.Fatalf("the run did not complete after %s: %+v\n%s", what, job.Status, tail(logs))
	}
	return logs
}

// waitStep waits until rank 0 has reported step n of the current run (a checkpoint).
func (r ringRun) waitStep(t *testing.T, n int) {
	t.Helper()
	re := regexp.MustCompile(`train: step (\d+) `)
	waitFor(t, fmt.Sprintf("the run at step %d", n), 5*time.Minute, func() (bool, string) {
		logs := r.logs(t)
		for _, m := range re.FindAllStringSubmatch(logs, -1) {
			if s, _ := strconv.Atoi(m[1]); s >= n {
				return true, ""
			}
		}
		return false, tail(logs)
	})
}

// latestStep is the step of the run's newest checkpoint, as the program wrote it (latest-step).
func (r ringRun) latestStep(t *testing.T) int {
	t.Helper()
	out := r.s.kubectl(t, "", "-n", r.ns, "exec", "tower-0", "-c", "tower", "--", "cat", "/shared/checkpoints/towers/"+r.run(t)+"/latest-step")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("latest-step: %q", out)
	}
	return n
}

// run is the launcher's run id.
func (r ringRun) run(t *testing.T) string {
	t.Helper()
	job, err := r.s.kube.BatchV1().Jobs(r.ns).Get(context.Background(), "launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job.Labels["kolotoc.dev/run"]
}

func (r ringRun) uid(t *testing.T, pod string) types.UID {
	p, err := r.s.kube.CoreV1().Pods(r.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.UID
}

type resumption struct {
	step int
	at   time.Time
}

// assertResumed checks the launcher restarted the run exactly once into attempt, and that both
// ranks resumed there from a checkpoint at the same step > 0; it returns that step and when the
// first rank said so.
func (r ringRun) assertResumed(t *testing.T, logs string, attempt int) resumption {
	t.Helper()
	if n := strings.Count(logs, "launcher: all hosts up; running"); n != attempt+1 {
		t.Errorf("the launcher started %d attempts, want %d:\n%s", n, attempt+1, tail(logs))
	}
	re := regexp.MustCompile(fmt.Sprintf(`(?m)^(\S+) train: rank (\d): resumed at step (\d+) from \S+ \(attempt %d\)`, attempt))
	ms := re.FindAllStringSubmatch(logs, -1)
	if len(ms) != 2 {
		t.Fatalf("want both ranks resumed from a checkpoint in attempt %d, got %d:\n%s", attempt, len(ms), tail(logs))
	}
	var res resumption
	for _, m := range ms {
		step, _ := strconv.Atoi(m[3])
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("timestamp %q: %v", m[1], err)
		}
		if step == 0 || (res.step != 0 && step != res.step) {
			t.Errorf("ranks resumed at steps %q, want one step > 0", ms)
		}
		if res.at.IsZero() || at.Before(res.at) {
			res.at = at
		}
		res.step = step
	}
	return res
}

// assertResult checks the run's final weights against an uninterrupted run of the same program
// over the same two towers, computed here: mpirun from tower-0, without checkpoints (none read,
// none written) and without the pause per step, which changes nothing but time.
func (r ringRun) assertResult(t *testing.T, logs string) {
	t.Helper()
	done := regexp.MustCompile(`train: done steps=(\d+) ranks=2 hosts=tower-0,tower-1 loss=(\S+) digest=([0-9a-f]+)`)
	got := done.FindStringSubmatch(logs)
	if got == nil || got[1] != demoSteps {
		t.Fatalf("the run did not finish %s steps over both towers:\n%s", demoSteps, tail(logs))
	}
	ref := r.s.kubectl(t, "", "-n", r.ns, "exec", "tower-0", "-c", "tower", "--", "bash", "-c",
		`KOLOTOC_CHECKPOINT_DIR= DEMO_STEPS=`+demoSteps+` DEMO_STEP_SECONDS=0 mpirun --hostfile "$KOLOTOC_HOSTFILE" `+
			`-x KOLOTOC_CHECKPOINT_DIR -x DEMO_STEPS -x DEMO_STEP_SECONDS python3 /code/train.py`)
	want := done.FindStringSubmatch(ref)
	if want == nil {
		t.Fatalf("the uninterrupted reference run did not finish:\n%s", tail(ref))
	}
	if got[3] != want[3] || got[2] != want[2] {
		t.Errorf("the restarted run ended with loss %s digest %s; an uninterrupted run ends with loss %s digest %s", got[2], got[3], want[2], want[3])
	}
	if !strings.Contains(ref, "starting at step 0") {
		t.Errorf("the reference run read a checkpoint:\n%s", tail(ref))
	}
}

// assertState runs the printed runState command, as printed, and checks its line: the phase,
// the attempt and the restarts; it returns the command's output.
func (r ringRun) assertState(t *testing.T, command, phase string, attempt, restarts int) string {
	t.Helper()
	if command == "" {
		t.Fatal("the stack prints no runState command")
	}
	var out string
	waitFor(t, "runState "+phase, time.Minute, func() (bool, string) {
		out = r.s.shell(t, command, "")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			return false, out
		}
		f := strings.Fields(lines[1])
		// RUN PHASE ATTEMPT RESTARTS MAX STEP UPDATED REASONS…
		return len(f) >= 7 && f[1] == phase && f[2] == fmt.Sprint(attempt) && f[3] == fmt.Sprint(restarts), out
	})
	t.Logf("runState:\n%s", out)
	return out
}
