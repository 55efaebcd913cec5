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
)

// TestEtcdKeepsQuorumForReal runs Kolotoc's etcd (the rendezvous store of elastic PyTorch with an
// etcd backend) with 3 members on the real node, from the local image (Debian's etcd 3.4, v2 API
// on), and drills the loss of a member: with one member's pod deleted, the other two keep the
// quorum and serve reads and writes on the v2 API torch's rendezvous uses; the lost member comes
// back with its data and catches up.
func TestEtcdKeepsQuorumForReal(t *testing.T) {
	t.Parallel()
	lockRealNode(t)
	s := newStack(t, "e2e-etcd", "dev", workloadOnly(t, "etcd", map[string]any{
		"enabled": true, "members": 3, "image": localImage(t, "etcd"),
		"pool": "node", "cpu": "100m", "memory": "128Mi", "storageSize": "1Gi",
	}))
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

	t.Run("the NetworkPolicies admit etcd's traffic, and refuse what Kolotoc forbids", func(t *testing.T) {
		s := s.sub(t)
		member, entry := podEnd(t, s, ns, "etcd-0"), podEnd(t, s, ns, s.podName(t, ns, "entrypoint"))
		client, peer := member.port(t, "client"), member.port(t, "peer")
		checkFlows(t, s, flows, missingAllow{"etcd-peers", "etcd", "etcd"}, []flow{
			{From: entry, To: member, Port: client},             // no rendezvous client in this stack
			{From: entry, To: member, Port: peer},               // nor a member
			{From: elsewhere(member), To: member, Port: client}, // another namespace
		})
	})
}
