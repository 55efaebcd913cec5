//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// TestEtcdKeepsQuorumForReal runs Kolotoc's etcd with 3 members on the real node, from the local
// image (Debian's etcd 3.4, v2 API on), as the rendezvous of elastic PyTorch: two CPU workers
// with torchrun's etcd-v2 backend (python-etcd) form their group through it and all-reduce. Then
// the drill: with one member's pod deleted, the other two keep the quorum, serve reads and writes
// on the v2 API, and serve the rendezvous (a worker lost meanwhile re-joins, and the group
// all-reduces again); the lost member comes back with its data and catches up.
func TestEtcdKeepsQuorumForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t, 1000) // 3 etcd members 100m, 2 elastic workers 200m, the scheduler 200m
	overrides := workloadOnly(t, "etcd", map[string]any{
		"enabled": true, "members": 3, "image": localImage(t, "etcd"),
		"pool": "node", "cpu": "100m", "memory": "128Mi", "storageSize": "1Gi",
	})
	overrides["elastic"] = map[string]any{
		"enabled": true, "image": localImage(t, "torch"), "pool": "node",
		"minNodes": 1, "maxNodes": 2, "nodes": 2, "rdzvBackend": "etcd-v2",
		"cpu": "200m", "memory": "1536Mi",
	}
	s := newStack(t, "e2e-etcd", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	flows := recordFlows(t, s)
	s.up()

	endpoints := func(members ...int) string {
		var e []string
		for _, i := range members {
			e = append(e, fmt.Sprintf("http://etcd-%d.etcd-peer.%s.svc:2379", i, ns))
		}
		return strings.Join(e, ",")
	}
	// v2 is the API torch's etcd rendezvous speaks (python-etcd).
	v2 := func(t *testing.T, member int, args ...string) (string, error) {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", s.kubeconfig, "-n", ns, "exec", fmt.Sprintf("etcd-%d", member), "--",
			"env", "ETCDCTL_API=2", "etcdctl", "--endpoints", endpoints(member)}, args...)...)
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	health := func(member int) (string, error) {
		b, err := exec.Command("kubectl", "--kubeconfig", s.kubeconfig, "-n", ns, "exec", fmt.Sprintf("etcd-%d", member), "--",
			"env", "ETCDCTL_API=3", "etcdctl", "--endpoints", endpoints(0, 1, 2), "--command-timeout=3s", "endpoint", "health").CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	waitFor(t, "3 healthy etcd members", 3*time.Minute, func() (bool, string) {
		out, err := health(0)
		return err == nil && strings.Count(out, "is healthy") == 3, out
	})
	if out, err := v2(t, 0, "set", "/kolotoc/drill/before", "1"); err != nil {
		t.Fatalf("v2 set on a healthy cluster: %v: %s", err, out)
	}
	w := elasticWorkers{s: s, ns: ns}
	formed := time.Now()
	w.waitOK(t, "both elastic workers' all-reduce over 2 ranks, rendezvous in etcd", 6*time.Minute, 2, map[string]int{"elastic-0": 0, "elastic-1": 0})
	t.Logf("elastic over the etcd-v2 rendezvous: all-reduce over 2 ranks %s after etcd was healthy", time.Since(formed).Round(time.Second))

	// The drill: member 1 is lost.
	old, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), "etcd-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	if err := s.kube.CoreV1().Pods(ns).Delete(context.Background(), "etcd-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "etcd-1 gone", 2*time.Minute, func() (bool, string) {
		p, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), "etcd-1", metav1.GetOptions{})
		return err != nil || p.UID != old.UID, "still there"
	})
	// Quorum holds: the two others take writes and serve reads through the v2 API meanwhile.
	if out, err := v2(t, 0, "set", "/kolotoc/drill/during", "2"); err != nil {
		t.Errorf("v2 set with a member lost: %v: %s", err, out)
	}
	if out, err := v2(t, 2, "get", "/kolotoc/drill/during"); err != nil || out != "2" {
		t.Errorf("v2 get from etcd-2 with a member lost: %q %v", out, err)
	}
	// The member comes back (the StatefulSet recreates it on its volume) and catches up.
	waitFor(t, "etcd-1 back and 3 healthy members", 3*time.Minute, func() (bool, string) {
		p, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), "etcd-1", metav1.GetOptions{})
		if err != nil || p.UID == old.UID || !podReady(p) {
			return false, "etcd-1 not ready"
		}
		out, err := health(0)
		return err == nil && strings.Count(out, "is healthy") == 3, out
	})
	recovered := time.Since(lost).Round(time.Second)
	if out, err := v2(t, 1, "get", "/kolotoc/drill/during"); err != nil || out != "2" {
		t.Errorf("the returned member does not serve what was written while it was away: %q %v", out, err)
	}
	t.Logf("etcd drill: member etcd-1 deleted; quorum kept (writes and reads on the v2 API); 3 healthy members again after %s", recovered)

	t.Run("with a member held down, the other two serve the rendezvous", func(t *testing.T) {
		// The StatefulSet brings a deleted member back within seconds; to be sure that two
		// members alone serve a re-forming group, hold etcd-2 down (scale to 2) meanwhile.
		scale := func(n int32) {
			t.Helper()
			// Read and written again on a conflict: the StatefulSet controller updates the object
			// between the two while the members come and go.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				sc, err := s.kube.AppsV1().StatefulSets(ns).GetScale(context.Background(), "etcd", metav1.GetOptions{})
				if err != nil {
					return err
				}
				sc.Spec.Replicas = n
				_, err = s.kube.AppsV1().StatefulSets(ns).UpdateScale(context.Background(), "etcd", sc, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		scale(2)
		defer scale(3) // what the stack says: no drift is left behind
		waitFor(t, "etcd-2 down", 2*time.Minute, func() (bool, string) {
			_, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), "etcd-2", metav1.GetOptions{})
			return err != nil, "etcd-2 still there"
		})
		down := time.Now()
		w.loseAndReform(t, "elastic-1", "elastic-0")
		if _, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), "etcd-2", metav1.GetOptions{}); err == nil {
			t.Fatal("etcd-2 came back during the drill: the rendezvous was not served by two members alone")
		}
		t.Logf("drill: etcd-2 held down, elastic-1 deleted; the group re-formed through two etcd members and all-reduced after %s", time.Since(down).Round(time.Second))
		scale(3)
		waitFor(t, "etcd-2 back and 3 healthy members", 3*time.Minute, func() (bool, string) {
			out, err := health(0)
			return err == nil && strings.Count(out, "is healthy") == 3, out
		})
	})

	t.Run("the NetworkPolicies admit etcd's traffic, and refuse what Kolotoc forbids", func(t *testing.T) {
		s := s.sub(t)
		member, entry := podEnd(t, s, ns, "etcd-0"), podEnd(t, s, ns, s.podName(t, ns, "entrypoint"))
		client, peer := member.port(t, "client"), member.port(t, "peer")
		checkFlows(t, s, flows, missingAllow{"etcd-peers", "etcd", "etcd"}, []flow{
			{From: entry, To: member, Port: client},                       // the entrypoint is no rendezvous client
			{From: podEnd(t, s, ns, "elastic-0"), To: member, Port: peer}, // a client is no member
			{From: elsewhere(member), To: member, Port: client},           // another namespace
		})
	})

	// After the flows are judged: the conntrack recording takes every connection to the stack's
	// pods, so the intruder's, once its deny is lifted, would be judged as the workloads' own
	// (seen under Cilium: "intruder → etcd-0:2379 was made by the workloads, but the policies
	// refuse it").
	t.Run("another namespace to etcd's client port: refused for real, admitted once lifted", func(t *testing.T) {
		requireEnforcer(t)
		s := s.sub(t)
		otherNS, other := intruder(t, s)
		ip := s.podIP(t, ns, "etcd-0")
		s.refusedThenLifted(t, func() func() {
			return s.allowPolicy(t, ns, s.podLabels(t, ns, "etcd-0"), otherNS, map[string]string{"canary": "intruder"}, 2379)
		}, path{"another namespace to etcd", otherNS, other, "", ip, 2379})
	})
}
