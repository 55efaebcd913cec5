//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDayTwo: what happens after the first up. Re-runs change nothing; deleted pods come back
// and the stack still previews clean; hand-made drift is shown by refresh and undone by up; an
// up killed half way converges on the next one with nothing duplicated or orphaned.
func TestDayTwo(t *testing.T) {
	t.Parallel() // see doc.go
	withEtcd := map[string]any{"etcd": map[string]any{"enabled": true, "members": 1}}
	s := newStack(t, "e2e-day2", gpuDev, withEtcd)
	ns := "kolotoc-" + s.name
	ctx := context.Background()
	s.up()

	t.Run("second up changes nothing", func(t *testing.T) {
		s := s.sub(t)
		summary := s.up()
		for op, n := range summary {
			if op != "same" && n > 0 {
				t.Errorf("second up with nothing changed: %d %s (%v)", n, op, summary)
			}
		}
		if r := s.run("", "preview", "--expect-no-changes"); r.code != 0 {
			t.Errorf("preview --expect-no-changes exited %d:\n%s", r.code, tail(r.stdout))
		}
	})

	t.Run("deleted pods come back, stack still clean", func(t *testing.T) {
		s := s.sub(t)
		for _, sel := range []string{"app.kubernetes.io/component=tower", "app.kubernetes.io/component=etcd",
			"app.kubernetes.io/component=entrypoint"} {
			pods, err := s.kube.CoreV1().Pods(ns).List(ctx, listOpts(sel))
			if err != nil || len(pods.Items) == 0 {
				t.Fatalf("no pod for %s: %v", sel, err)
			}
			victim := pods.Items[0]
			if err := s.kube.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a ready replacement for "+victim.Name, 2*time.Minute, func() (bool, string) {
				pods, err := s.kube.CoreV1().Pods(ns).List(ctx, listOpts(sel))
				if err != nil {
					return false, err.Error()
				}
				for _, p := range pods.Items {
					if p.UID != victim.UID && podReady(&p) && p.DeletionTimestamp == nil {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d pods, none new and ready", len(pods.Items))
			})
		}
		if r := s.run("", "preview", "--expect-no-changes"); r.code != 0 {
			t.Errorf("preview after the pods came back exited %d:\n%s", r.code, tail(r.stdout))
		}
	})

	t.Run("refresh shows a hand-scaled StatefulSet, up restores it", func(t *testing.T) {
		s := s.sub(t)
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "tower", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
		if _, err := s.kube.AppsV1().StatefulSets(ns).UpdateScale(ctx, "tower", scale, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
		out := s.pulumi("refresh", "--yes", "--json")
		if summary := changeSummary(t, out); summary["update"] == 0 {
			t.Errorf("refresh did not show the drift: %v", summary)
		}
		s.up()
		s.assertTowers(t, ns, 2, 8)
		if r := s.run("", "preview", "--expect-no-changes"); r.code != 0 {
			t.Errorf("preview after restoring exited %d:\n%s", r.code, tail(r.stdout))
		}
	})

	t.Run("an up killed half way converges", func(t *testing.T) {
		s := s.sub(t)
		s.reconfigure(gpuDev, map[string]any{
			"etcd":      withEtcd["etcd"],
			"towers":    map[string]any{"count": 3, "gpusPerTower": 8, "pool": "gpu"},
			"nodePools": devPoolsWithGPUNodes(t, 3),
		})
		s.killUpWhen(t, func() bool {
			// Half way: the new node exists, the towers have not been updated yet.
			_, err := s.kube.CoreV1().Nodes().Get(ctx, "kolotoc-"+s.name+"-gpu-2", metav1.GetOptions{})
			return err == nil
		})
		// The README's recovery: release the killed run's lock, drop the operations it left
		// pending (refresh reads what did get created), then up.
		s.pulumi("cancel", "--yes")
		s.pulumi("refresh", "--yes", "--clear-pending-creates")
		s.up()
		s.assertTowers(t, ns, 3, 8)
		if r := s.run("", "preview", "--expect-no-changes"); r.code != 0 {
			t.Errorf("preview after recovering exited %d:\n%s", r.code, tail(r.stdout))
		}
		// Nothing duplicated or orphaned: every object of the stack in the cluster is in state, the
		// nodes through the pool that owns them.
		inState := s.stateObjects(t)
		nodes, _ := s.kube.CoreV1().Nodes().List(ctx, listOpts(s.selector()))
		for _, n := range nodes.Items {
			if ref := metav1.GetControllerOf(&n); ref == nil || ref.Kind != "SimulatedNodePool" || !inState["SimulatedNodePool/"+ref.Name] {
				t.Errorf("node %s is in the cluster but its pool is not in the stack's state (controller %v)", n.Name, ref)
			}
		}
		if len(nodes.Items) != 4 {
			t.Errorf("%d nodes, want 3 GPU + 1 CPU", len(nodes.Items))
		}
		jobs, _ := s.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		sets, _ := s.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		for _, j := range jobs.Items {
			if !inState["Job/"+j.Name] {
				t.Errorf("job %s orphaned", j.Name)
			}
		}
		for _, x := range sets.Items {
			if !inState["StatefulSet/"+x.Name] {
				t.Errorf("statefulset %s orphaned", x.Name)
			}
		}
	})
}

// killUpWhen starts `pulumi up`, SIGKILLs it and its plugins once cond holds, and waits for it.
func (s *stack) killUpWhen(t *testing.T, cond func() bool) {
	t.Helper()
	cmd := exec.Command("pulumi", "up", "--yes", "--skip-preview", "--stack", s.name, "--non-interactive")
	cmd.Dir, cmd.Env = repoRoot, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case err := <-done:
			t.Fatalf("pulumi up finished (%v) before it could be killed half way:\n%s", err, tail(out.String()))
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatal("the condition to kill pulumi up never held")
		case <-time.After(100 * time.Millisecond):
			if cond() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Logf("killed pulumi up half way")
				return
			}
		}
	}
}

// stateObjects lists "<Kind>/<name>" of every Kubernetes object in the stack's state.
func (s *stack) stateObjects(t *testing.T) map[string]bool {
	t.Helper()
	var dep struct {
		Deployment struct {
			Resources []struct {
				Type    string         `json:"type"`
				Outputs map[string]any `json:"outputs"`
			} `json:"resources"`
			Pending []any `json:"pending_operations"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal([]byte(s.pulumi("stack", "export")), &dep); err != nil {
		t.Fatal(err)
	}
	if n := len(dep.Deployment.Pending); n > 0 {
		t.Errorf("%d pending operations left in state", n)
	}
	out := map[string]bool{}
	for _, r := range dep.Deployment.Resources {
		if !strings.HasPrefix(r.Type, "kubernetes:") {
			continue
		}
		md, _ := r.Outputs["metadata"].(map[string]any)
		kind, _ := r.Outputs["kind"].(string)
		name, _ := md["name"].(string)
		out[kind+"/"+name] = true
	}
	return out
}
