// Package tests holds Kolotoc's cross-cutting tests: what every stack registers (under a recording
// mock, snapshotted as golden YAML), properties that must hold for every stack file, and (build tag
// e2e) the end-to-end suite against a real local cluster.
package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	corev1 "k8s.io/api/core/v1"

	"kolotoc/components/cluster/simapi"
	"kolotoc/components/meta/rendertest"
	"kolotoc/stacks"
)

const (
	testPassword = "correct-horse-battery-staple"
	testSeed     = "4cb085380e5f9d8f58cea32480fb882e55eaab5516bd7148cd01c02c3597e20e" // 256 bits (sha256 of "kolotoc test seed")
	// fakeClusterIP is what the mock API server assigns to every ClusterIP Service.
	fakeClusterIP = rendertest.FakeClusterIP
	// fakeNamespaceUID is the UID the mocks give every Namespace.
	fakeNamespaceUID = rendertest.FakeNamespaceUID
	// fakeLoadBalancerIP is the address the mocked cloud gives every LoadBalancer Service.
	fakeLoadBalancerIP = rendertest.FakeLoadBalancerIP
	secretMarker       = rendertest.SecretMarker
)

// registered is one resource as the program registered it.
type registered = rendertest.Resource

// recorder is the components' recording mock (rendertest.Recorder) with the mocked clouds
// besides: what a cloud reports once a resource exists and what its invokes return
// (clouds_test.go).
type recorder struct {
	rendertest.Recorder
	mu     sync.Mutex
	charts []map[string]any // the jsonOpts of every `helm template` the program asked the provider for
}

func (r *recorder) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	id, state, err := r.Recorder.NewResource(args)
	cloudState(args.TypeToken, state) // what a cloud reports once a resource exists (clouds_test.go)
	return id, state, err
}

func (r *recorder) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	if _, err := r.Recorder.Call(args); err != nil {
		return nil, err
	}
	if args.Token == tHelmTemplate {
		// The chart's rendering is testbed/checks/kueuechart's (Helm's engine); here the program's
		// request is kept and no object is returned.
		var opts map[string]any
		if err := json.Unmarshal([]byte(args.Args["jsonOpts"].StringValue()), &opts); err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.charts = append(r.charts, opts)
		r.mu.Unlock()
		return resource.PropertyMap{}, nil
	}
	return cloudCall(args), nil // the clouds' invokes (clouds_test.go)
}

// called reports whether the program invoked a function (a provider's token).
func (r *recorder) called(token string) bool { return r.Called(token) }

// sorted returns the registrations in a stable order (registration order varies with goroutines).
func (r *recorder) sorted() []registered { return r.Sorted() }

// ofType returns the registrations of one type token.
func (r *recorder) ofType(token string) []registered { return r.OfType(token) }

// simulatedNodes are the Nodes the registered SimulatedNodePools ask the local cluster for, as
// testbed/cluster/simpool makes them: <pool>-<i> for i below spec.nodes, each carrying the pool's
// template and its own hostname label. Each is returned as if registered, with the pool's resource
// name as its Parent (what depends on the pool waits for its nodes).
func (r *recorder) simulatedNodes() []registered {
	var out []registered
	for _, pool := range r.ofType(tPool) {
		var p simulatedPool
		b, _ := json.Marshal(inputs(pool))
		if err := json.Unmarshal(b, &p); err != nil {
			panic(fmt.Sprintf("SimulatedNodePool %s: %v", pool.Name, err)) // the mock recorded what the program built
		}
		for i := 0; i < p.Spec.Nodes; i++ {
			name := simapi.NodeName(p.Metadata.Name, i)
			labels := map[string]any{"kubernetes.io/hostname": name}
			for k, v := range p.Spec.Template.Metadata.Labels {
				labels[k] = v
			}
			node := map[string]any{"metadata": map[string]any{
				"name": name, "labels": labels, "annotations": p.Spec.Template.Metadata.Annotations,
			}}
			if len(p.Spec.Template.Spec.Taints) > 0 {
				node["spec"] = map[string]any{"taints": p.Spec.Template.Spec.Taints}
			}
			out = append(out, registered{Type: "kubernetes:core/v1:Node", Name: name, Parent: pool.Name,
				Inputs: resource.NewPropertyMapFromMap(node)})
		}
	}
	return out
}

// simulatedPool is what the tests read of a SimulatedNodePool (package simapi has no Go type
// for it: the pool controller reads it unstructured).
type simulatedPool struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Nodes    int `json:"nodes"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Taints []map[string]any `json:"taints"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// one returns the single registration of a type and name, failing the test otherwise.
func (r *recorder) one(t *testing.T, token, name string) registered {
	t.Helper()
	return r.One(t, token, name)
}

// withTestSecrets sets the secrets as `make up` sets them, then the overrides (kolotoc: prefix
// added).
func withTestSecrets(raw stacks.Raw, overrides map[string]string) stacks.Raw {
	raw.Values["kolotoc:jupyterPassword"] = testPassword
	raw.Values["kolotoc:sshKeySeed"] = testSeed
	raw.Secrets["kolotoc:jupyterPassword"] = true
	raw.Secrets["kolotoc:sshKeySeed"] = true
	for k, v := range overrides {
		raw.Values["kolotoc:"+k] = v
	}
	return raw
}

// compareGolden compares got with the golden file at path, which UPDATE_GOLDEN=1 rewrites first.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	rendertest.CompareGolden(t, path, got)
}

// stackRaw reads a committed stack file with the secrets set as `make up` sets them, pointing the
// cluster's kubeconfig at a throwaway file (the mock never connects).
func stackRaw(t *testing.T, stack string, overrides map[string]string) stacks.Raw {
	t.Helper()
	raw, err := stacks.ReadStackFile(filepath.Join("..", "Pulumi."+stack+".yaml"), "kolotoc", stack, "")
	if err != nil {
		t.Fatal(err)
	}
	return withTestSecrets(raw, overrides)
}

// fakeKubeconfig writes a kubeconfig the program can read; its content must only ever reach the
// registered inputs as a secret.
func fakeKubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(fakeKubeconfigText), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const fakeKubeconfigText = `apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: admin, user: {token: kubeconfig-token-that-must-stay-secret}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
`

// deploy loads a stack's Raw config and runs the program under the recording mock.
func deploy(t *testing.T, raw stacks.Raw) *recorder {
	t.Helper()
	cfg, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	err = pulumi.RunErr(func(ctx *pulumi.Context) error {
		return stacks.Deploy(ctx, cfg)
	}, pulumi.WithMocks(raw.Project, raw.Stack, rec))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// goldenYAML renders every registration, in a stable order, as one YAML document each.
func goldenYAML(t *testing.T, rec *recorder) []byte {
	t.Helper()
	return rendertest.GoldenYAML(t, &rec.Recorder)
}

// get walks a path of object keys (and "[i]" indexes) through plain values.
func get(v any, path ...string) any { return rendertest.Get(v, path...) }

func inputs(r registered) any { return rendertest.Inputs(r) }

// gpuNodesSelected checks that a DaemonSet's node selector picks exactly the registered simulated
// nodes that have GPUs, and returns those nodes.
func gpuNodesSelected(t *testing.T, rec *recorder, what string, sel map[string]string) []corev1.Node {
	t.Helper()
	var gpu []corev1.Node
	for _, r := range rec.simulatedNodes() {
		n := decode[corev1.Node](t, r)
		selected := true
		for k, v := range sel {
			selected = selected && n.Labels[k] == v
		}
		var capacity map[string]string
		if err := json.Unmarshal([]byte(n.Annotations["kolotoc.dev/simulated-capacity"]), &capacity); err != nil {
			t.Fatal(err)
		}
		hasGPU := capacity["nvidia.com/gpu"] != ""
		if selected != hasGPU {
			t.Errorf("node %s: %s selected=%v but has GPUs=%v", n.Name, what, selected, hasGPU)
		}
		if hasGPU {
			gpu = append(gpu, n)
		}
	}
	if len(gpu) == 0 {
		t.Fatal("no GPU node among the simulated nodes")
	}
	return gpu
}

// output is one stack output once resolved: its value and whether it is a secret.
type output struct {
	value  any
	secret bool
}

// awaitOutputs resolves every output into got, with its secretness.
func awaitOutputs(ctx *pulumi.Context, outs pulumi.Map, got map[string]output) error {
	for k, v := range outs {
		r, err := internals.UnsafeAwaitOutput(ctx.Context(), pulumi.ToOutput(v))
		if err != nil {
			return fmt.Errorf("output %s: %w", k, err)
		}
		got[k] = output{value: r.Value, secret: r.Secret}
	}
	return nil
}

// resolveOutputs resolves stack outputs under the mock, keeping which are secret: a secret
// output is stored encrypted in state and shown only with --show-secrets.
func resolveOutputs(t *testing.T, raw stacks.Raw, outs pulumi.Map) map[string]output {
	t.Helper()
	got := map[string]output{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		return awaitOutputs(ctx, outs, got)
	}, pulumi.WithMocks(raw.Project, raw.Stack, &recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	return got
}
