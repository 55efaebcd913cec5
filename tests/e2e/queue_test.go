//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestQueueGangAdmission: two stacks on simulated GPU pools share one Kueue ClusterQueue (the real
// Kueue, run by testbed/cluster/cluster.sh). Stack A's ring (2 towers × 8 GPUs) takes the whole
// quota of 16 GPUs, which A's ClusterQueue derives from A's pools; stack B names A's ClusterQueue
// (queue.clusterQueue), and its ring does not fit beside A's. B's `pulumi up` ends (its towers are
// not awaited), and B's ring is held as one unit: its towers' StatefulSet's Workload not
// admitted, every tower gated, none bound to a node, A's pods untouched. When A's run ends with
// onSuccess: release (the launcher's release account scales A's towers to zero), A's Workload
// ends, B is admitted and its towers run.
//
// On kwok nodes nothing runs: a Job's pod succeeds as soon as it runs
// (testbed/cluster/kwokctl.yaml's pod-complete stage), so the launcher's release step, a scale of
// the towers to zero by the launcher's own account, is done here with that account (impersonated),
// as the launcher's release.py does it. (The launcher is not queued, meta.SetGang: on kwok its
// pod ends at once, so B's launcher tells nothing here.) TestQueueRealNode runs the whole ring for real.
func TestQueueGangAdmission(t *testing.T) {
	suffix := randomHex(t, 3)
	aName, bName := "qa-"+suffix, "qb-"+suffix
	aNS, bNS := "kolotoc-"+aName, "kolotoc-"+bName
	a := newStack(t, aName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"queue":  map[string]any{"type": "kueue"},
		"towers": map[string]any{"count": 2, "gpusPerTower": 8, "pool": "gpu", "run": "a1", "onSuccess": "release"},
	}))
	start := time.Now()
	a.up()
	t.Logf("stack A up in %s", time.Since(start).Round(time.Second))
	waitFor(t, "A's ring admitted and running", 3*time.Minute, func() (bool, string) {
		w := setWorkload(t, a, aNS, "tower")
		pods := podsOf(t, a, aNS)
		return w.admitted() && len(pods) == 2 && pods.bound() == 2 && pods.running() == 2,
			fmt.Sprintf("workload %s; %d tower pods, %d bound, %d running", w, len(pods), pods.bound(), pods.running())
	})
	t.Logf("A's Workload admitted %s after its creation", setWorkload(t, a, aNS, "tower").latency)
	a.waitJob(t, aNS, "launcher", 2*time.Minute)
	// The queue's objects read back as written: a second up would change nothing. (The check of
	// Kueue's CRD is a read at every preview, which changes nothing: `pulumi preview
	// --expect-no-changes` passes with it.)
	steps, _ := a.preview()
	for urn, op := range steps {
		if op == "read" {
			delete(steps, urn)
		}
	}
	if len(steps) != 0 {
		t.Errorf("preview of stack A with nothing changed: %s, want no change", fmtMap(steps))
	}
	aPods := podsOf(t, a, aNS)
	outs := a.outputs()
	q, _ := outs["queue"].(map[string]any)
	if q["clusterQueue"] != aNS || !strings.Contains(fmt.Sprint(q["workloads"]), "get workloads.kueue.x-k8s.io") {
		t.Errorf("A's queue outputs %v: want its ClusterQueue %s and how to see its workloads", q, aNS)
	}

	// B: its own pools (room on its nodes), A's ClusterQueue (no quota left).
	b := newStack(t, bName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"queue":  map[string]any{"type": "kueue", "clusterQueue": aNS},
		"towers": map[string]any{"count": 1, "gpusPerTower": 8, "pool": "gpu"},
	}))
	start = time.Now()
	b.up() // ends although B's towers are held: they are not awaited
	t.Logf("stack B up (held) in %s", time.Since(start).Round(time.Second))
	waitFor(t, "B's ring held as one unit", 2*time.Minute, func() (bool, string) {
		w := setWorkload(t, b, bNS, "tower")
		all := allQueued(t, b, bNS)
		return w.exists() && !w.admitted() && len(all) == 1 && all.gated() == 1,
			fmt.Sprintf("workload %s; %d queued pods, %d gated", w, len(all), all.gated())
	})
	// Held a while: still no pod of B on a node, A's pods where they were.
	time.Sleep(10 * time.Second)
	if all := allQueued(t, b, bNS); all.bound() != 0 || len(all) != 1 {
		t.Errorf("B held: %d of its %d pods bound to a node, want none", all.bound(), len(all))
	}
	if w := setWorkload(t, b, bNS, "tower"); w.admitted() {
		t.Errorf("B's ring admitted beside A's: %s", w)
	}
	if now := podsOf(t, a, aNS); !samePlacement(aPods, now) {
		t.Errorf("A's towers moved while B waited: %s, then %s", aPods, now)
	}

	// A's run ends: its release account scales its towers to zero (onSuccess: release).
	released := time.Now()
	releaseTowers(t, aNS)
	waitFor(t, "B admitted after A's release", 3*time.Minute, func() (bool, string) {
		w := setWorkload(t, b, bNS, "tower")
		all := allQueued(t, b, bNS)
		return w.admitted() && all.gated() == 0, fmt.Sprintf("workload %s; A's %s; %d of B's pods gated",
			w, setWorkload(t, a, aNS, "tower"), all.gated())
	})
	t.Logf("B admitted %s after A's release", time.Since(released).Round(100*time.Millisecond))
	waitFor(t, "B's tower running", 2*time.Minute, func() (bool, string) {
		pods := podsOf(t, b, bNS)
		return pods.running() == 1, pods.String()
	})
	if w := setWorkload(t, a, aNS, "tower"); !w.released() {
		t.Errorf("A's workload after its release: %s, want finished or gone", w)
	}
}

// kueueWorkload is what the test reads of a Kueue Workload.
type kueueWorkload struct {
	name       string // set by setWorkload
	found      bool
	conditions map[string]string
	// latency: from the Workload's creation (once all the group's pods exist) to its Admitted
	// condition, what Kueue adds before the scheduler sees the pods (whole seconds: the API's
	// resolution).
	latency time.Duration
}

func (w kueueWorkload) exists() bool   { return w.found }
func (w kueueWorkload) admitted() bool { return w.conditions["Admitted"] == "True" }
func (w kueueWorkload) finished() bool { return w.conditions["Finished"] == "True" }
func (w kueueWorkload) String() string {
	if !w.found {
		return "(none)"
	}
	return w.name + fmt.Sprint(w.conditions)
}

// workload reads the Workload of a pod group (its name is the group's).
func workload(t *testing.T, s *stack, ns, name string) kueueWorkload {
	t.Helper()
	out, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/apis/kueue.x-k8s.io/v1beta2/namespaces", ns, "workloads", name).DoRaw(context.Background())
	if err != nil {
		return kueueWorkload{}
	}
	var wl struct {
		Metadata struct{ CreationTimestamp time.Time }
		Status   struct {
			Conditions []struct {
				Type, Status       string
				LastTransitionTime time.Time
			}
		}
	}
	if err := json.Unmarshal(out, &wl); err != nil {
		t.Fatal(err)
	}
	w := kueueWorkload{found: true, conditions: map[string]string{}}
	for _, c := range wl.Status.Conditions {
		w.conditions[c.Type] = c.Status
		if c.Type == "Admitted" && c.Status == "True" {
			w.latency = c.LastTransitionTime.Sub(wl.Metadata.CreationTimestamp)
		}
	}
	return w
}

// setWorkload reads the Workload Kueue's StatefulSet integration made for the StatefulSet of
// that name (statefulset-<name>-<hash of name and uid>): the newest of those whose owner
// annotations name it; none if there is none (a released set's ends).
func setWorkload(t *testing.T, s *stack, ns, name string) kueueWorkload {
	t.Helper()
	list := workloadsIn(t, s, ns)
	newest, at := "", time.Time{}
	for _, wl := range list {
		a := wl.Metadata.Annotations
		if a["kueue.x-k8s.io/job-owner-name"] == name && strings.Contains(a["kueue.x-k8s.io/job-owner-gvk"], "StatefulSet") &&
			!wl.Metadata.CreationTimestamp.Before(at) {
			newest, at = wl.Metadata.Name, wl.Metadata.CreationTimestamp
		}
	}
	if newest == "" {
		return kueueWorkload{}
	}
	w := workload(t, s, ns, newest)
	w.name = newest
	return w
}

// listedWorkload is what the tests read of a Workload in a list.
type listedWorkload struct {
	Metadata struct {
		Name              string
		CreationTimestamp time.Time
		Annotations       map[string]string
		OwnerReferences   []struct{ Kind, Name string }
	}
}

// workloadsIn lists the namespace's Kueue Workloads (none if the list fails).
func workloadsIn(t *testing.T, s *stack, ns string) []listedWorkload {
	t.Helper()
	out, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/apis/kueue.x-k8s.io/v1beta2/namespaces", ns, "workloads").DoRaw(context.Background())
	if err != nil {
		return nil
	}
	var list struct{ Items []listedWorkload }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// released: a released set's Workload is finished or already gone.
func (w kueueWorkload) released() bool { return !w.found || w.finished() }

type podList []corev1.Pod

func (p podList) bound() (n int) {
	for _, x := range p {
		if x.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func (p podList) running() (n int) {
	for _, x := range p {
		if x.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// gated counts the pods Kueue holds (its admission scheduling gate).
func (p podList) gated() (n int) {
	for _, x := range p {
		for _, g := range x.Spec.SchedulingGates {
			if g.Name == "kueue.x-k8s.io/admission" {
				n++
				break
			}
		}
	}
	return n
}

func (p podList) String() string {
	var b strings.Builder
	for _, x := range p {
		fmt.Fprintf(&b, "%s@%s ", x.Name, x.Spec.NodeName)
	}
	return b.String()
}

// only is the pod of that name, if it is in the list.
func (p podList) only(name string) podList {
	for _, x := range p {
		if x.Name == name {
			return podList{x}
		}
	}
	return nil
}

// samePlacement: the same pods (by UID) on the same nodes.
func samePlacement(before, after podList) bool {
	if len(before) != len(after) {
		return false
	}
	at := map[types.UID]string{}
	for _, x := range before {
		at[x.UID] = x.Spec.NodeName
	}
	for _, x := range after {
		if n, ok := at[x.UID]; !ok || n != x.Spec.NodeName {
			return false
		}
	}
	return true
}

// podsOf are the stack's tower pods.
func podsOf(t *testing.T, s *stack, ns string) podList {
	t.Helper()
	pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()+",app.kubernetes.io/component=tower"))
	if err != nil {
		t.Fatal(err)
	}
	return podList(pods.Items)
}

// allQueued are the stack's pods that name a queue (towers and launcher).
func allQueued(t *testing.T, s *stack, ns string) podList {
	t.Helper()
	pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()+",kueue.x-k8s.io/queue-name"))
	if err != nil {
		t.Fatal(err)
	}
	return podList(pods.Items)
}

// TestQueueRealNode: the dev stack's CPU ring, admitted through Kueue on the real node (kubelet
// and containerd), still runs its MPI allreduce; with onSuccess: release its towers go, the
// real kubelet stops them, and the pod group's Workload is finished (its quota freed). Beside
// it, queued elastic workers: the group at minNodes (1) and an extra worker admitted on its own
// (elastic-extra-1, another StatefulSet) run torchrun's all-reduce over both ranks together.
func TestQueueRealNode(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 1500) // 2 towers 250m, the launcher, 2 elastic workers 200m, the entrypoint with Jupyter
	towers, _ := configValue(t, "dev", "kolotoc:towers").(map[string]any)
	towers["run"], towers["onSuccess"] = "q1", "release"
	s := newStack(t, "e2e-queue-dev", "dev", map[string]any{
		"towers":    towers,
		"queue":     map[string]any{"type": "kueue"},
		"carriers":  map[string]any{"enabled": false},
		"sentinels": map[string]any{"enabled": false},
		"elastic": map[string]any{
			"enabled": true, "image": localImage(t, "torch"), "pool": "node",
			"minNodes": 1, "maxNodes": 2, "nodes": 2, "rdzvBackend": "c10d", "cpu": "200m", "memory": "1536Mi",
		},
	})
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	start := time.Now()
	s.up()
	t.Logf("up in %s", time.Since(start).Round(time.Second))
	waitFor(t, "the ring admitted", 2*time.Minute, func() (bool, string) {
		w := setWorkload(t, s, ns, "tower")
		return w.admitted(), w.String()
	})
	t.Logf("ring admitted %s after the up began; its Workload %s after its creation", time.Since(start).Round(100*time.Millisecond),
		setWorkload(t, s, ns, "tower").latency)
	job := s.waitJob(t, ns, "launcher", 6*time.Minute)
	logs := s.kubectl(t, "", "-n", ns, "logs", "job/launcher")
	if job.Status.Succeeded == 0 {
		t.Fatalf("the queued launcher failed: %+v\n%s", job.Status, tail(logs))
	}
	if !strings.Contains(logs, "train: done steps=300 ranks=2") {
		t.Fatalf("launcher log has no training over the two towers:\n%s", tail(logs))
	}
	waitFor(t, "the towers released and their Workload ended", 3*time.Minute, func() (bool, string) {
		w := setWorkload(t, s, ns, "tower")
		n := len(podsOf(t, s, ns))
		return n == 0 && w.released(), fmt.Sprintf("%d tower pods, workload %s", n, w)
	})

	t.Run("elastic workers queued at minNodes, the extra admitted alone, one rendezvous", func(t *testing.T) {
		waitFor(t, "the elastic group and the extra worker admitted", 3*time.Minute, func() (bool, string) {
			g, x := setWorkload(t, s, ns, "elastic"), podWorkload(t, s, ns, "elastic-extra-1")
			return g.admitted() && x.admitted(), fmt.Sprintf("group %s, extra %s", g, x)
		})
		w := elasticWorkers{s: s, ns: ns}
		w.waitOK(t, "an all-reduce over both ranks, the group's worker and the extra", 6*time.Minute, 2, map[string]int{"elastic-0": 0, "elastic-extra-1": 0})
	})
}

// podWorkload is the Workload Kueue made for a pod admitted on its own (not in a group): the one
// the pod owns.
func podWorkload(t *testing.T, s *stack, ns, pod string) kueueWorkload {
	t.Helper()
	list := workloadsIn(t, s, ns)
	for _, wl := range list {
		for _, o := range wl.Metadata.OwnerReferences {
			if o.Kind == "Pod" && o.Name == pod {
				return workload(t, s, ns, wl.Metadata.Name)
			}
		}
	}
	return kueueWorkload{}
}

// TestQueueElasticExtrasYield: stack A's queued elastic workers on simulated GPU pools (the real
// Kueue): the group at minNodes (1 worker × 8 GPUs) and one extra worker (8 GPUs) fill A's
// ClusterQueue (16 GPUs), each admitted. Stack B's ring (8 GPUs), in A's ClusterQueue at the
// default priority, then does not fit: Kueue preempts A's extra, whose priority is one below
// (A's ClusterQueue preempts withinClusterQueue: LowerPriority,
// https://kueue.sigs.k8s.io/docs/concepts/preemption/), and admits B. A's group keeps running
// on its node; the extra's pod comes back gated, waiting for quota. Without the extras' lower
// priority or the ClusterQueue's preemption, B would wait for as long as A's extra runs.
func TestQueueElasticExtrasYield(t *testing.T) {
	suffix := randomHex(t, 3)
	aName, bName := "qea-"+suffix, "qeb-"+suffix
	aNS, bNS := "kolotoc-"+aName, "kolotoc-"+bName
	aCfg := withQuiet(map[string]any{
		"queue":   map[string]any{"type": "kueue"},
		"towers":  map[string]any{"enabled": false},
		"elastic": map[string]any{"enabled": true, "pool": "gpu", "minNodes": 1, "maxNodes": 2, "nodes": 2, "cpu": "2", "memory": "8Gi"},
	})
	a := newStack(t, aName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", aCfg)
	a.up()
	waitFor(t, "A's elastic group and its extra worker admitted and running", 3*time.Minute, func() (bool, string) {
		g, x := setWorkload(t, a, aNS, "elastic"), podWorkload(t, a, aNS, "elastic-extra-1")
		pods := elasticPods(t, a, aNS)
		return g.admitted() && x.admitted() && pods.running() == 2, fmt.Sprintf("group %s, extra %s, %d of %d running", g, x, pods.running(), len(pods))
	})
	group := elasticPods(t, a, aNS).only("elastic-0")

	bCfg := withQuiet(map[string]any{
		"queue":  map[string]any{"type": "kueue", "clusterQueue": aNS},
		"towers": map[string]any{"count": 1, "gpusPerTower": 8, "pool": "gpu"},
	})
	b := newStack(t, bName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", bCfg)
	start := time.Now()
	b.up()
	waitFor(t, "B's ring admitted, A's extra preempted", 3*time.Minute, func() (bool, string) {
		w := setWorkload(t, b, bNS, "tower")
		all := allQueued(t, b, bNS)
		return w.admitted() && all.gated() == 0, fmt.Sprintf("B's workload %s, %d of B's pods gated; A's extra %s",
			w, all.gated(), podWorkload(t, a, aNS, "elastic-extra-1"))
	})
	t.Logf("B admitted %s after its up began, by preempting A's extra worker", time.Since(start).Round(100*time.Millisecond))
	waitFor(t, "B's tower running", 2*time.Minute, func() (bool, string) {
		pods := podsOf(t, b, bNS)
		return pods.running() == 1, pods.String()
	})
	if g := setWorkload(t, a, aNS, "elastic"); !g.admitted() {
		t.Errorf("A's group after B's admission: %s, want still admitted (its priority is B's)", g)
	}
	if now := elasticPods(t, a, aNS).only("elastic-0"); !samePlacement(group, now) {
		t.Errorf("A's group worker moved: %s, then %s", group, now)
	}
	waitFor(t, "A's extra back in the queue, gated", 2*time.Minute, func() (bool, string) {
		x := elasticPods(t, a, aNS).only("elastic-extra-1")
		return len(x) == 1 && x.gated() == 1 && x.bound() == 0, fmt.Sprintf("extra pods %s, its workload %s", x, podWorkload(t, a, aNS, "elastic-extra-1"))
	})
}

// elasticPods are the elastic workers' pods of a stack, both sets.
func elasticPods(t *testing.T, s *stack, ns string) podList {
	t.Helper()
	pods, err := s.kube.CoreV1().Pods(ns).List(context.Background(), listOpts(s.selector()+",app.kubernetes.io/component=elastic"))
	if err != nil {
		t.Fatal(err)
	}
	return podList(pods.Items)
}

// TestQueueTowerReplaced: a tower of an admitted queued ring whose pod is deleted (as a drain, an
// eviction or a lost node would) is re-created by its StatefulSet under the same name and runs
// at once under the same Workload, which stays admitted and never waits for a replacement. With
// the towers in one Kueue plain pod group (before), the deleted pod kept Kueue's finalizer and
// its group waited for a replacement pod of another name that the StatefulSet never makes
// (WaitingForReplacementPods), holding its quota and nodes (docs/queueing.md).
func TestQueueTowerReplaced(t *testing.T) {
	name := "qr-" + randomHex(t, 3)
	ns := "kolotoc-" + name
	s := newStack(t, name, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"queue":  map[string]any{"type": "kueue"},
		"towers": map[string]any{"count": 2, "gpusPerTower": 8, "pool": "gpu", "onSuccess": "release", "maxRestarts": 2},
	}))
	s.up()
	waitFor(t, "the ring admitted and running", 3*time.Minute, func() (bool, string) {
		w := setWorkload(t, s, ns, "tower")
		pods := podsOf(t, s, ns)
		return w.admitted() && pods.running() == 2, fmt.Sprintf("workload %s; towers %s", w, pods)
	})
	before := setWorkload(t, s, ns, "tower")
	old := podsOf(t, s, ns).only("tower-1")
	if err := s.kube.CoreV1().Pods(ns).Delete(context.Background(), "tower-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitFor(t, "tower-1 re-created and running under the same admission", 2*time.Minute, func() (bool, string) {
		now := podsOf(t, s, ns).only("tower-1")
		w := setWorkload(t, s, ns, "tower")
		return len(now) == 1 && now[0].UID != old[0].UID && now.running() == 1 && now.gated() == 0 && w.name == before.name && w.admitted(),
			fmt.Sprintf("tower-1 %v (old uid %s); workload %s", now, old[0].UID, w)
	})
	t.Logf("tower-1 running again %s after its deletion", time.Since(deleted).Round(100*time.Millisecond))
	if w := setWorkload(t, s, ns, "tower"); w.conditions["WaitingForReplacementPods"] == "True" {
		t.Errorf("the Workload waits for replacement pods: %s", w)
	}
}

// TestQueueTFClusterAdmittedWhole: a queued TF cluster on simulated GPU pools (the real Kueue) is one plain
// pod group across its task types: stack A's TF cluster (a chief, a parameter server, an
// evaluator and 2 workers × 8 GPUs: the whole quota of A's two 8-GPU nodes) is admitted as one
// Workload `tfcluster` and every task is placed; stack B's TF cluster (one 8-GPU worker) in A's
// ClusterQueue is held whole: its Workload not admitted, every task gated, none bound to a node.
// (docs/queueing.md said a queued TF cluster had run; only mocks had queued one.)
func TestQueueTFClusterAdmittedWhole(t *testing.T) {
	suffix := randomHex(t, 3)
	aName, bName := "qta-"+suffix, "qtb-"+suffix
	aNS, bNS := "kolotoc-"+aName, "kolotoc-"+bName
	tf := func(workers int) map[string]any {
		return map[string]any{"enabled": true, "tensorboard": false,
			"chief": map[string]any{"count": 1}, "ps": map[string]any{"count": 1}, "evaluator": map[string]any{"count": 1},
			"workers": map[string]any{"count": workers, "gpus": 8, "pool": "gpu"}}
	}
	a := newStack(t, aName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"queue": map[string]any{"type": "kueue"}, "towers": map[string]any{"enabled": false}, "tfcluster": tf(2),
	}))
	a.up()
	waitFor(t, "A's TF cluster admitted as one group, every task placed", 3*time.Minute, func() (bool, string) {
		w := workload(t, a, aNS, "tfcluster")
		all := allQueued(t, a, aNS)
		return w.admitted() && len(all) == 5 && all.bound() == 5 && all.gated() == 0,
			fmt.Sprintf("workload %s; %d queued tasks, %d bound, %d gated", w, len(all), all.bound(), all.gated())
	})
	b := newStack(t, bName, "examples/gpu-dev/Pulumi.gpu-dev.yaml", withQuiet(map[string]any{
		"queue": map[string]any{"type": "kueue", "clusterQueue": aNS}, "towers": map[string]any{"enabled": false}, "tfcluster": tf(1),
	}))
	b.up()
	waitFor(t, "B's TF cluster held whole", 2*time.Minute, func() (bool, string) {
		w := workload(t, b, bNS, "tfcluster")
		all := allQueued(t, b, bNS)
		return w.exists() && !w.admitted() && len(all) == 4 && all.gated() == 4,
			fmt.Sprintf("workload %s; %d queued tasks, %d gated", w, len(all), all.gated())
	})
	time.Sleep(10 * time.Second)
	if all := allQueued(t, b, bNS); all.bound() != 0 {
		t.Errorf("B held: %d of its tasks bound to a node, want none", all.bound())
	}
}
