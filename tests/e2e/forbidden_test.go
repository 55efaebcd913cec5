//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kolotoc/components/isolation"
)

// The paths Kolotoc's NetworkPolicies forbid, tried for real on the real node under Cilium
// (enforcer_test.go): each dial must be refused (Cilium drops: the client times out after
// dialTimeout), and must connect once a policy lifting that one deny is added, which shows the
// refusal was the policy's and not a broken network.

// intruder is a pod of another namespace on the real node: a client for the paths that no pod
// outside a stack's namespace may take. Its namespace goes with the test.
func intruder(t *testing.T, s *stack) (ns, pod string) {
	t.Helper()
	ns = "kolotoc-intruder-" + randomHex(t, 3)
	ctx := context.Background()
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := s.kube.CoreV1().Pods(ns).Create(ctx, canaryPod("intruder", localImage(t, "dask"), "sleep", "infinity"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := runningPodIP(s.kube, ns, "intruder", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	return ns, "intruder"
}

// path is one forbidden connection: from a pod (and container) to an address and port.
type path struct {
	what                string
	fromNS, from, fromC string
	host                string
	port                int
}

func (p path) String() string {
	return fmt.Sprintf("%s (%s/%s → %s:%d)", p.what, p.fromNS, p.from, p.host, p.port)
}

// dialFrom connects once from the path's client container.
func (s *stack) dialFrom(p path) error {
	return dial(s.kubeconfig, p.fromNS, p.from, p.fromC, p.host, p.port)
}

// refusedThenLifted asserts every path refused (twice each: one connection is a failure), then
// runs lift, after which each must connect within policyWait; the undo lift returns puts the deny
// back.
func (s *stack) refusedThenLifted(t *testing.T, lift func() (undo func()), paths ...path) {
	t.Helper()
	for _, p := range paths {
		for i := 0; i < 2; i++ {
			if err := s.dialFrom(p); err == nil {
				t.Errorf("%s: connected, want refused", p)
				return
			}
		}
	}
	undo := lift()
	defer undo()
	start := time.Now()
	for _, p := range paths {
		for {
			err := s.dialFrom(p)
			if err == nil {
				t.Logf("%s: refused; connected %s after its deny was lifted", p, time.Since(start).Round(100*time.Millisecond))
				break
			}
			if time.Since(start) > policyWait {
				t.Errorf("%s: still refused %s after its deny was lifted (so the refusal may not be the policy's): %v", p, policyWait, err)
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
}

// allowPolicy adds a NetworkPolicy to ns admitting ingress to the pods of toLabels from the pods of
// fromLabels (in fromNS when it is another namespace) on port, and returns its removal.
func (s *stack) allowPolicy(t *testing.T, ns string, toLabels map[string]string, fromNS string, fromLabels map[string]string, port int) func() {
	t.Helper()
	peer := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: fromLabels}}
	if fromNS != ns {
		peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fromNS}}
	}
	name := "e2e-lift-" + randomHex(t, 3)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: toLabels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{peer},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(int32(port)))}},
			}},
		},
	}
	if _, err := s.kube.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = s.kube.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
}

// podIP is a running pod's address.
func (s *stack) podIP(t *testing.T, ns, name string) string {
	t.Helper()
	ip, err := runningPodIP(s.kube, ns, name, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// podLabels are a pod's app.kubernetes.io labels, which select its component. Not all its labels:
// Cilium leaves the Kubernetes-managed ones (statefulset.kubernetes.io/pod-name,
// controller-revision-hash, pod-template-hash, …) out of a pod's identity, so a selector naming
// them matches no pod at all under Cilium (docs.cilium.io, "Limiting Identity-Relevant Labels").
func (s *stack) podLabels(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	p, err := s.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range p.Labels {
		if strings.HasPrefix(k, "app.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

// metadataStandIn serves TCP on addr:port inside the cluster's network namespace (the address put
// on its loopback for the test), standing in for a cloud's metadata endpoint: to Cilium an
// address that is neither a pod nor a node is the world, as the clouds' metadata servers are to a
// pod's egress. The listener is made in the namespace by a thread that enters it; it serves from
// any thread after.
func metadataStandIn(t *testing.T, addr netip.Addr, port int) {
	t.Helper()
	netns := clusterNetns()
	if out, err := exec.Command("nsenter", "--net="+netns, "--", "ip", "addr", "add", addr.String()+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s in %s: %v %s", addr, netns, err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("nsenter", "--net="+netns, "--", "ip", "addr", "del", addr.String()+"/32", "dev", "lo").Run()
	})
	ln, err := listenIn(netns, fmt.Sprintf("%s:%d", addr, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// listenIn listens on addr inside the network namespace at path netns.
func listenIn(netns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result)
	go func() {
		// This thread enters the namespace and never leaves it: it is not unlocked, so the runtime
		// ends it with the goroutine instead of reusing it elsewhere.
		runtime.LockOSThread()
		f, err := os.Open(netns)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", netns, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}

// TestForbiddenPathsRefusedForReal deploys a small dev stack on the real node (a tower whose
// launcher stays up, a carrier, the entrypoint with Jupyter) and tries, for real, the paths its
// NetworkPolicies forbid: a carrier to a tower's sshd, a pod of another namespace to the
// entrypoint (the Dask scheduler, Jupyter) and to the towers, any pod to the metadata addresses
// (stand-ins in the cluster's namespace), a carrier to the launcher (which holds the release
// rights); and Jupyter admitted from the stack's own pods. Each refusal is lifted by a policy of
// the test's and then connects. etcd from another namespace: TestEtcdKeepsQuorumForReal.
func TestForbiddenPathsRefusedForReal(t *testing.T) {
	requireEnforcer(t)
	t.Parallel()
	lockRealNode(t, 900) // a tower and its sentinel, the launcher, a carrier, the entrypoint with Jupyter
	overrides := workloadOnly(t, "towers", map[string]any{
		"image": localImage(t, "mpi"), "count": 1, "gpusPerTower": 0, "pool": "node", "cpu": "100m", "memory": "256Mi",
		"launcherCpu": "100m", "launcherMemory": "128Mi", "command": []string{"sleep", "3600"},
	})
	overrides["carriers"] = map[string]any{"enabled": true, "count": 1, "workersPerCarrier": 1, "pool": "node",
		"cpu": "100m", "memory": "512Mi", "image": localImage(t, "dask")}
	entry := overrides["entrypoint"].(map[string]any)
	entry["jupyter"] = true
	s := newStack(t, "e2e-forbid", "dev", overrides)
	ns := "kolotoc-" + s.name
	requireRealNode(t, s)
	s.up()
	otherNS, other := intruder(t, s)
	launcher := s.podName(t, ns, "launcher")
	entrypoint := s.podName(t, ns, "entrypoint")
	tower, carrier := s.podIP(t, ns, "tower-0"), "carrier-0"
	s.podIP(t, ns, carrier)
	entryIP := s.podIP(t, ns, entrypoint)
	labels := func(pod string) map[string]string { return s.podLabels(t, ns, pod) }

	t.Run("a carrier to a tower's sshd", func(t *testing.T) {
		s := s.sub(t)
		s.refusedThenLifted(t, func() func() {
			return s.allowPolicy(t, ns, labels("tower-0"), ns, labels(carrier), 2222)
		}, path{"carrier to sshd", ns, carrier, "dask-worker", tower, 2222})
	})
	t.Run("another namespace to the towers and the entrypoint", func(t *testing.T) {
		s := s.sub(t)
		for _, p := range []struct {
			to   string
			ip   string
			port int
		}{{"tower-0", tower, 2222}, {entrypoint, entryIP, 8786}, {entrypoint, entryIP, 8888}} {
			s.refusedThenLifted(t, func() func() {
				return s.allowPolicy(t, ns, labels(p.to), otherNS, map[string]string{"canary": "intruder"}, p.port)
			}, path{"another namespace to " + p.to, otherNS, other, "", p.ip, p.port})
		}
	})
	t.Run("Jupyter from the stack's own pods, as its policy admits", func(t *testing.T) {
		s := s.sub(t)
		if err := s.dialFrom(path{"carrier to Jupyter", ns, carrier, "dask-worker", entryIP, 8888}); err != nil {
			t.Errorf("a carrier of the stack could not reach Jupyter (entrypoint-ui admits the namespace's pods): %v", err)
		}
	})
	t.Run("a carrier to the launcher", func(t *testing.T) {
		s := s.sub(t)
		// The launcher's own ports are mpirun's, picked at run time: a listener of the test's in
		// the launcher's container stands in for them (the towers may reach it; nothing else).
		stop := s.background(t, fmt.Sprintf("kubectl --kubeconfig %s -n %s exec %s -c launcher -- python3 -c %q", s.kubeconfig, ns, launcher,
			"import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('', 7777)); s.listen(64); [s.accept()[0].close() for _ in iter(int, 1)]"))
		defer stop()
		launcherIP := s.podIP(t, ns, launcher)
		waitFor(t, "the launcher's stand-in listener, from a tower", time.Minute, func() (bool, string) {
			err := s.dialFrom(path{"tower to launcher", ns, "tower-0", "tower", launcherIP, 7777})
			return err == nil, fmt.Sprint(err)
		})
		s.refusedThenLifted(t, func() func() {
			return s.allowPolicy(t, ns, labels(launcher), ns, labels(carrier), 7777)
		}, path{"carrier to launcher", ns, carrier, "dask-worker", launcherIP, 7777})
	})
	t.Run("any pod to the metadata addresses", func(t *testing.T) {
		s := s.sub(t)
		for _, cidr := range isolation.MetadataAddresses {
			a := netip.MustParsePrefix(cidr).Addr()
			if !a.Is4() {
				continue // the node runs no IPv6
			}
			metadataStandIn(t, a, 80)
		}
		deny, err := s.kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), isolation.DenyEgressName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var paths []path
		for _, cidr := range isolation.MetadataAddresses {
			if a := netip.MustParsePrefix(cidr).Addr(); a.Is4() {
				paths = append(paths, path{"carrier to metadata", ns, carrier, "dask-worker", a.String(), 80})
			}
		}
		// GKE's Cloud DNS answers pods on the metadata address: its DNS port stays open under the
		// deny (TCP tried here; the rule admits UDP alike). The test bed's CoreDNS listens on port
		// 53 of every address of the cluster's namespace, the stand-in's included, so it answers
		// there as GKE's metadata server does.
		dnsAddr := netip.MustParsePrefix(isolation.MetadataDNS).Addr().String()
		if err := s.dialFrom(path{"carrier to the Cloud DNS resolver", ns, carrier, "dask-worker", dnsAddr, 53}); err != nil {
			t.Errorf("a carrier could not reach %s:53 under the metadata deny (GKE's Cloud DNS resolver): %v", dnsAddr, err)
		}
		s.refusedThenLifted(t, func() func() {
			// The deny is a policy of its own: lifted by deleting it, put back after.
			if err := s.kube.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), deny.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return func() {
				back := deny.DeepCopy()
				back.ResourceVersion, back.UID, back.CreationTimestamp, back.ManagedFields = "", "", metav1.Time{}, nil
				if _, err := s.kube.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), back, metav1.CreateOptions{}); err != nil {
					t.Errorf("putting %s back: %v", deny.Name, err)
				}
			}
		}, paths...)
		// Beside the denied addresses, the rest of the world stays open: the git host is reached.
		if err := s.dialFrom(path{"carrier to the git host", ns, carrier, "dask-worker", localEnv(t, "OUTSIDE_IP"), gitDaemonPort}); err != nil {
			t.Errorf("a carrier could not reach the outside (the demo git host) beside the metadata deny: %v", err)
		}
	})
}
