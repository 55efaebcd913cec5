//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The real node's NetworkPolicies are enforced by Cilium (testbed/node/node.sh, KOLOTOC_NETWORK=
// cilium, which make e2e sets), the enforcer of GKE Dataplane V2 and AKS. An enforcer that silently
// does nothing is the known failure of such a set-up: every connection is admitted and every test
// of a policy passes. So before any test runs, a canary is checked on the real node (TestMain): a
// client dials a server its namespace's default deny forbids, and must be refused; then a policy
// admits it, and it must connect. The suite refuses to start otherwise.

// canaryPort is the canary server's port.
const canaryPort = 8080

// dialTimeout bounds one attempt to connect: Cilium drops a refused connection (the client hears
// nothing), so a refusal is a timeout.
const dialTimeout = 3 * time.Second

// policyWait is how long a policy change may take to reach the datapath (Cilium computes and
// loads an endpoint's policy asynchronously: about a second here).
const policyWait = 30 * time.Second

func TestMain(m *testing.M) {
	if err := enforcerCheck(); err != nil {
		fmt.Fprintf(os.Stderr, "the e2e suite refuses to start: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// enforcing reports whether the real node's network enforces NetworkPolicies: KOLOTOC_NETWORK is
// cilium (make e2e passes it; testbed/node/node.sh). With the bridge plugin nothing enforces them,
// and the flows stay judged only (flows_test.go).
func enforcing() bool { return os.Getenv("KOLOTOC_NETWORK") == "cilium" }

// requireEnforcer skips a test of enforcement on a node whose network enforces nothing.
func requireEnforcer(t *testing.T) {
	t.Helper()
	if !enforcing() {
		t.Skip("the real node's network enforces no NetworkPolicy (KOLOTOC_NETWORK is not cilium): nothing to refuse for real")
	}
}

// enforcerCheck runs the canary when the suite runs with an enforcer (KOLOTOC_NETWORK=cilium)
// and the cluster has its real node (a cluster of simulated nodes only runs no pod, so no policy
// can be enforced or broken there; the tests that need the node fail by themselves).
// KOLOTOC_KUBECONFIG unset: the tests say what is missing.
func enforcerCheck() error {
	kubeconfig := os.Getenv("KOLOTOC_KUBECONFIG")
	if kubeconfig == "" || clusterName() == defaultCluster || !enforcing() {
		return nil
	}
	kube, err := kubeClient(kubeconfig)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Nodes().Get(context.Background(), realNode, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "e2e: cluster %s has no real node: no NetworkPolicy enforcer to check\n", clusterName())
		return nil
	}
	r, err := canary(kube, kubeconfig)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: NetworkPolicies enforced on %s: the canary refused three times running within %s of its default deny, admitted %s after its allow\n",
		realNode, r.refusedAfter.Round(100*time.Millisecond), r.admittedAfter.Round(100*time.Millisecond))
	return nil
}

// testKube is the suite's cluster for a test that needs no stack: its kubeconfig and a client.
func testKube(t *testing.T) (string, *kubernetes.Clientset) {
	t.Helper()
	kubeconfig, _ := localCluster(t)
	kube, err := kubeClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig, kube
}

func kubeClient(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// canaryReport is what the canary saw: how long after each policy the dial went its way.
type canaryReport struct {
	refusedAfter, admittedAfter time.Duration
}

// errNotEnforcing is the canary's verdict on an enforcer that admits what a policy forbids.
var errNotEnforcing = errors.New("NetworkPolicies are not enforced")

// canary deploys a server and a client on the real node in a namespace of its own, with a default
// deny of ingress, and asks for its verdicts. The namespace is deleted after (in the background).
func canary(kube *kubernetes.Clientset, kubeconfig string) (canaryReport, error) {
	c, err := startCanary(kube, kubeconfig)
	if c != nil {
		defer c.close()
	}
	if err != nil {
		return canaryReport{}, err
	}
	return c.verdicts()
}

// canaryRun is a deployed canary: its namespace (with the default deny) and its server's address.
type canaryRun struct {
	kube           *kubernetes.Clientset
	kubeconfig, ns string
	ip             string
}

// startCanary deploys the canary and waits for its pods to run. Close it even on error.
func startCanary(kube *kubernetes.Clientset, kubeconfig string) (*canaryRun, error) {
	ctx := context.Background()
	image, err := imageRef("dask") // python3: the server; bash and timeout: the client's dial
	if err != nil {
		return nil, err
	}
	c := &canaryRun{kube: kube, kubeconfig: kubeconfig, ns: fmt.Sprintf("kolotoc-canary-%d", time.Now().UnixNano()%1_000_000)}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := kube.NetworkingV1().NetworkPolicies(c.ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{}); err != nil {
		return c, err
	}
	server := canaryPod("server", image, "python3", "-m", "http.server", "--bind", "0.0.0.0", fmt.Sprint(canaryPort))
	client := canaryPod("client", image, "sleep", "infinity")
	for _, p := range []*corev1.Pod{server, client} {
		if _, err := kube.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return c, err
		}
	}
	if c.ip, err = runningPodIP(kube, c.ns, "server", 3*time.Minute); err != nil {
		return c, err
	}
	_, err = runningPodIP(kube, c.ns, "client", 3*time.Minute)
	return c, err
}

func (c *canaryRun) close() {
	_ = c.kube.CoreV1().Namespaces().Delete(context.Background(), c.ns, metav1.DeleteOptions{})
}

// verdicts: the client must fail to reach the server within policyWait (its namespace denies all
// ingress); then a policy admits the client on the server's port, and it must connect within
// policyWait.
func (c *canaryRun) verdicts() (canaryReport, error) {
	ctx := context.Background()
	kubeconfig, ns, ip := c.kubeconfig, c.ns, c.ip
	var r canaryReport
	start := time.Now()
	// Refused three times running: one dropped connection proves nothing of an enforcer.
	refused := 0
	for refused < 3 && time.Since(start) < policyWait {
		if dial(kubeconfig, ns, "client", "", ip, canaryPort) == nil {
			refused = 0
			time.Sleep(300 * time.Millisecond)
			continue
		}
		refused++
	}
	if refused < 3 {
		return r, fmt.Errorf("%w on node %s: a client reached %s:%d for %s although its namespace denies all ingress (is KOLOTOC_NETWORK=cilium, and Cilium's agent running? testbed/node/node.sh)",
			errNotEnforcing, realNode, ip, canaryPort, policyWait)
	}
	r.refusedAfter = time.Since(start)
	if _, err := c.kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-client"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"canary": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(canaryPort))}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	start = time.Now()
	if !dialUntil(kubeconfig, ns, "client", ip, canaryPort, true, policyWait) {
		return r, fmt.Errorf("on node %s a client could not reach %s:%d within %s of a policy admitting it: the pod network or the enforcer is broken (testbed/node/node.sh logs)",
			realNode, ip, canaryPort, policyWait)
	}
	r.admittedAfter = time.Since(start)
	return r, nil
}

func ptr[T any](v T) *T { return &v }

// canaryPod is a small pod of the canary on the real node.
func canaryPod(role, image string, command ...string) *corev1.Pod {
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: map[string]string{"canary": role}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{realNodeLabel: "true"},
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers: []corev1.Container{{
				Name: role, Image: image, Command: command, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: small, Limits: small},
			}},
		},
	}
}

// runningPodIP waits until the pod runs and returns its address.
func runningPodIP(kube *kubernetes.Clientset, ns, name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p.Status.PodIP, nil
		}
		if time.Now().After(deadline) {
			why := fmt.Sprint(err)
			if err == nil {
				why = string(p.Status.Phase) + podWaitingReason(p)
			}
			return "", fmt.Errorf("pod %s/%s not running after %s: %s", ns, name, timeout, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dial connects once from a pod's container (its default one when container is empty) to
// host:port with bash's /dev/tcp under timeout: nil when the connection was made.
func dial(kubeconfig, ns, pod, container, host string, port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout+30*time.Second)
	defer cancel()
	script := fmt.Sprintf("timeout %d bash -c 'exec 3<>/dev/tcp/%s/%d'", int(dialTimeout.Seconds()), host, port)
	args := []string{"--kubeconfig", kubeconfig, "-n", ns, "exec", pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	out, err := exec.CommandContext(ctx, "kubectl", append(args, "--", "bash", "-c", script)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s/%s → %s:%d: %v %s", ns, pod, host, port, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dialUntil dials until the outcome is the one wanted (connected or not), for at most wait.
func dialUntil(kubeconfig, ns, pod, host string, port int, connect bool, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		if (dial(kubeconfig, ns, pod, "", host, port) == nil) == connect {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// imageRef is the reference of a local image (testbed/images/images.sh), as the real node has it.
func imageRef(name string) (string, error) {
	out, err := exec.Command(filepath.Join(repoRoot, "testbed", "images", "images.sh"), "ref", name).Output()
	if err != nil {
		return "", fmt.Errorf("testbed/images/images.sh ref %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// TestEnforcerCanary shows the canary's two verdicts on the suite's real node: refused by the
// default deny, admitted once a policy allows it (TestMain ran it before the suite; this run's
// figures are logged).
func TestEnforcerCanary(t *testing.T) {
	requireEnforcer(t)
	kubeconfig, kube := testKube(t)
	r, err := canary(kube, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("canary: refused three times running within %s of the default deny, admitted %s after the allow", r.refusedAfter, r.admittedAfter)
}

// TestSuiteRefusesWithoutEnforcer stops Cilium's agent on the real node (testbed/node/node.sh
// enforcer stop) under a running canary and checks that the canary, and so the suite, refuses to
// start: with the agent its datapath goes (its BPF filesystem lived in the agent's mount namespace),
// the pods keep their addresses and routes, and every connection is admitted, which is what an
// enforcer that silently does nothing looks like. The agent is started again after, restores the
// endpoints, and a fresh canary passes. Not parallel: no other test runs while the node has no
// enforcer.
func TestSuiteRefusesWithoutEnforcer(t *testing.T) {
	requireEnforcer(t)
	kubeconfig, kube := testKube(t)
	node := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(repoRoot, "testbed", "node", "node.sh"), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("testbed/node/node.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	c, err := startCanary(kube, kubeconfig)
	if c != nil {
		defer c.close()
	}
	if err != nil {
		t.Fatal(err)
	}
	node("enforcer", "stop")
	t.Cleanup(func() { node("enforcer", "start") })
	// The kernel lets go of the datapath once the agent's mount namespace is gone: a moment after,
	// or longer on a busy machine (make test runs the unit tests beside the suite; a fixed 5 s
	// sleep was seen to fall short). Waited for by the client's first connection, bounded.
	stopped := time.Now()
	for dial(kubeconfig, c.ns, "client", "", c.ip, canaryPort) != nil {
		if time.Since(stopped) > time.Minute {
			t.Fatalf("with Cilium's agent stopped a minute ago the canary's client still cannot connect: is the datapath still attached?")
		}
		time.Sleep(time.Second)
	}
	t.Logf("the canary's client connected %s after the agent stopped", time.Since(stopped).Round(100*time.Millisecond))
	_, err = c.verdicts()
	if !errors.Is(err, errNotEnforcing) {
		t.Fatalf("with Cilium's agent stopped the canary says %v, want %v", err, errNotEnforcing)
	}
	t.Logf("with the agent stopped the canary says: %v", err)
	node("enforcer", "start")
	if _, err := canary(kube, kubeconfig); err != nil {
		t.Fatalf("after the agent's restart: %v", err)
	}
}
