//go:build e2e

package standin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// recordingHost keeps what the provider logs, so tests can check progress messages and that
// no secret value was ever logged.
type recordingHost struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHost) Log(_ context.Context, _ diag.Severity, _ presource.URN, msg string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, msg)
	return nil
}

func (h *recordingHost) LogStatus(ctx context.Context, sev diag.Severity, urn presource.URN, msg string) error {
	return h.Log(ctx, sev, urn, msg)
}

func (h *recordingHost) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.msgs, "\n")
}

// e2e is one test's provider, cluster client and private namespace.
type e2e struct {
	t         *testing.T
	ctx       context.Context
	p         *Provider
	host      *recordingHost
	kube      kubernetes.Interface
	namespace string
	suffix    string
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// newE2E configures a provider against the cluster in KOLOTOC_KUBECONFIG and creates a
// namespace standin-test-<random> (through the provider), deleted when the test ends.
func newE2E(t *testing.T) *e2e {
	t.Helper()
	kubeconfig := os.Getenv("KOLOTOC_KUBECONFIG")
	if kubeconfig == "" {
		t.Fatal("KOLOTOC_KUBECONFIG is not set: the e2e tests need a running cluster (hack/cluster.sh up)")
	}
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("reading %s: %v", kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	host := &recordingHost{}
	p := New(host)
	p.ServiceSettle = 2 * time.Second
	if _, err := p.Configure(ctx, &pulumirpc.ConfigureRequest{
		AcceptSecrets: true, AcceptResources: true,
		Variables: map[string]string{"kubernetes:config:kubeconfig": kubeconfig},
	}); err != nil {
		t.Fatal(err)
	}
	if _, unreachable, reason := p.state(); unreachable {
		t.Fatalf("cluster unreachable: %s", reason)
	}
	e := &e2e{t: t, ctx: ctx, p: p, host: host, kube: kube, suffix: randomHex(4)}
	e.namespace = "standin-test-" + e.suffix
	e.apply("kubernetes:core/v1:Namespace", "ns", props(map[string]any{"metadata": map[string]any{"name": e.namespace}}))
	t.Cleanup(func() {
		err := kube.CoreV1().Namespaces().Delete(context.Background(), e.namespace, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up namespace %s: %v", e.namespace, err)
		}
	})
	return e
}

func props(m map[string]any) presource.PropertyMap { return presource.NewPropertyMapFromMap(m) }

func (e *e2e) urn(token, name string) string {
	return string(presource.NewURN("e2e", "standin", "", tokens.Type(token), name))
}

func (e *e2e) marshal(pm presource.PropertyMap) *structpb.Struct {
	s, err := plugin.MarshalProperties(pm, plugin.MarshalOptions{KeepSecrets: true, KeepUnknowns: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *e2e) unmarshal(s *structpb.Struct) presource.PropertyMap {
	pm, err := plugin.UnmarshalProperties(s, plugin.MarshalOptions{KeepSecrets: true, KeepUnknowns: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return pm
}

// resourceState is what the engine keeps between steps for one resource.
type resourceState struct {
	token, name, id string
	inputs, outputs *structpb.Struct
}

func (e *e2e) check(token, name string, olds *structpb.Struct, news presource.PropertyMap) *structpb.Struct {
	e.t.Helper()
	resp, err := e.p.Check(e.ctx, &pulumirpc.CheckRequest{Urn: e.urn(token, name), Olds: olds, News: e.marshal(news),
		RandomSeed: []byte(name)})
	if err != nil {
		e.t.Fatalf("Check %s: %v", name, err)
	}
	if len(resp.Failures) > 0 {
		e.t.Fatalf("Check %s failures: %v", name, resp.Failures)
	}
	return resp.Inputs
}

// apply runs Check and Create (not a preview) and fails the test on error.
func (e *e2e) apply(token, name string, news presource.PropertyMap) *resourceState {
	e.t.Helper()
	rs, err := e.create(token, name, news, 0)
	if err != nil {
		e.t.Fatalf("Create %s: %v", name, err)
	}
	return rs
}

func (e *e2e) create(token, name string, news presource.PropertyMap, timeout float64) (*resourceState, error) {
	e.t.Helper()
	inputs := e.check(token, name, nil, news)
	resp, err := e.p.Create(e.ctx, &pulumirpc.CreateRequest{Urn: e.urn(token, name), Properties: inputs, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return &resourceState{token: token, name: name, id: resp.Id, inputs: inputs, outputs: resp.Properties}, nil
}

func (e *e2e) diff(rs *resourceState, news presource.PropertyMap) (*pulumirpc.DiffResponse, *structpb.Struct) {
	e.t.Helper()
	inputs := e.check(rs.token, rs.name, rs.inputs, news)
	resp, err := e.p.Diff(e.ctx, &pulumirpc.DiffRequest{Id: rs.id, Urn: e.urn(rs.token, rs.name), Olds: rs.outputs, News: inputs})
	if err != nil {
		e.t.Fatalf("Diff %s: %v", rs.name, err)
	}
	return resp, inputs
}

func (e *e2e) update(rs *resourceState, inputs *structpb.Struct, preview bool) *structpb.Struct {
	e.t.Helper()
	resp, err := e.p.Update(e.ctx, &pulumirpc.UpdateRequest{Id: rs.id, Urn: e.urn(rs.token, rs.name), Olds: rs.outputs,
		News: inputs, Preview: preview})
	if err != nil {
		e.t.Fatalf("Update %s: %v", rs.name, err)
	}
	if !preview {
		rs.inputs, rs.outputs = inputs, resp.Properties
	}
	return resp.Properties
}

func (e *e2e) read(rs *resourceState) *pulumirpc.ReadResponse {
	e.t.Helper()
	resp, err := e.p.Read(e.ctx, &pulumirpc.ReadRequest{Id: rs.id, Urn: e.urn(rs.token, rs.name), Properties: rs.outputs, Inputs: rs.inputs})
	if err != nil {
		e.t.Fatalf("Read %s: %v", rs.name, err)
	}
	return resp
}

func (e *e2e) delete(rs *resourceState) {
	e.t.Helper()
	if _, err := e.p.Delete(e.ctx, &pulumirpc.DeleteRequest{Id: rs.id, Urn: e.urn(rs.token, rs.name), Properties: rs.outputs}); err != nil {
		e.t.Fatalf("Delete %s: %v", rs.name, err)
	}
}

// node registers a kwok-managed Node that only this test's Pods tolerate, removed at the end.
func (e *e2e) node(capacity corev1.ResourceList) (taintKey string) {
	e.t.Helper()
	name := "standin-test-" + e.suffix
	taintKey = "standin-test/" + e.suffix
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{"type": "kwok", "standin-test": e.suffix},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: taintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := e.kube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating node: %v", err)
	}
	e.t.Cleanup(func() {
		if err := e.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("deleting node %s: %v", name, err)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		got, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return taintKey
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.t.Fatalf("node %s did not become Ready", name)
	return ""
}

func smallNode() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
}

// podSpec runs on this test's node only.
func (e *e2e) podSpec(taintKey string, containers []any) map[string]any {
	return map[string]any{
		"nodeSelector": map[string]any{"standin-test": e.suffix},
		"tolerations":  []any{map[string]any{"key": taintKey, "operator": "Exists", "effect": "NoSchedule"}},
		"containers":   containers,
	}
}
