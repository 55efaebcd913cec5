// Package tests holds Kolotoc's cross-cutting tests: what every stack registers (under a recording
// mock, snapshotted as golden YAML), properties that must hold for every stack file, and (build tag
// e2e) the end-to-end suite against a real local cluster.
package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"gopkg.in/yaml.v3"

	"kolotoc/components/cluster/simapi"
	"kolotoc/stacks"
)

const (
	testPassword = "correct-horse-battery-staple"
	testSeed     = "4cb085380e5f9d8f58cea32480fb882e55eaab5516bd7148cd01c02c3597e20e" // 256 bits (sha256 of "kolotoc test seed")
	// fakeClusterIP is what the mock API server assigns to every ClusterIP Service.
	fakeClusterIP = "10.96.0.42"
	// fakeNamespaceUID is the UID the mocks give every Namespace.
	fakeNamespaceUID = "6f2c1d0e-namespace-uid"
	// fakeLoadBalancerIP is the address the mocked cloud gives every LoadBalancer Service.
	fakeLoadBalancerIP = "198.51.100.7"
	secretMarker       = "[secret]"
)

// registered is one resource as the program registered it.
type registered struct {
	Type                string
	Name                string
	Parent              string
	Protect             bool
	DeleteBeforeReplace bool
	ReplaceOnChanges    []string // pulumi.ReplaceOnChanges' property paths
	IgnoreChanges       []string // pulumi.IgnoreChanges' property paths
	CreateTimeout       string   // pulumi.Timeouts' create timeout, if any
	UpdateTimeout       string   // pulumi.Timeouts' update timeout, if any
	DeleteTimeout       string   // pulumi.Timeouts' delete timeout, if any
	DependsOn           []string // names of the resources named in pulumi.DependsOn
	DependsOnURNs       []string // their URNs (the type path tells a component from its child of the same name)
	Inputs              resource.PropertyMap
}

// recorder is a pulumi.MockResourceMonitor that keeps every registration and the token of every
// invoke.
type recorder struct {
	mu    sync.Mutex
	all   []registered
	calls []string
	// lbIngress is the status.loadBalancer.ingress[0] of LoadBalancer Services; default
	// {ip: fakeLoadBalancerIP}.
	lbIngress map[string]any
}

func (r *recorder) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	rec := registered{Type: args.TypeToken, Name: args.Name, Inputs: args.Inputs}
	if rpc := args.RegisterRPC; rpc != nil {
		rec.Parent = rpc.GetParent()
		if i := strings.LastIndex(rec.Parent, "::"); i >= 0 {
			rec.Parent = rec.Parent[i+2:]
		}
		rec.Protect, rec.DeleteBeforeReplace = rpc.GetProtect(), rpc.GetDeleteBeforeReplace()
		rec.ReplaceOnChanges = rpc.GetReplaceOnChanges()
		rec.IgnoreChanges = rpc.GetIgnoreChanges()
		rec.CreateTimeout = rpc.GetCustomTimeouts().GetCreate()
		rec.UpdateTimeout = rpc.GetCustomTimeouts().GetUpdate()
		rec.DeleteTimeout = rpc.GetCustomTimeouts().GetDelete()
		for _, urn := range rpc.GetDependencies() {
			rec.DependsOn = append(rec.DependsOn, urn[strings.LastIndex(urn, "::")+2:])
			rec.DependsOnURNs = append(rec.DependsOnURNs, urn)
		}
	}
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
	state := args.Inputs.Copy()
	if args.TypeToken == "kubernetes:core/v1:Namespace" {
		// The API server gives each namespace a UID; etcd's static volumes live under it.
		md := resource.PropertyMap{}
		if m, ok := state["metadata"]; ok && m.IsObject() {
			md = m.ObjectValue().Copy()
		}
		md["uid"] = resource.NewProperty(fakeNamespaceUID)
		state["metadata"] = resource.NewProperty(md)
	}
	if args.TypeToken == "kubernetes:core/v1:Service" {
		// The API server assigns a ClusterIP; the storage component feeds it into the volume.
		spec := resource.PropertyMap{}
		if s, ok := state["spec"]; ok && s.IsObject() {
			spec = s.ObjectValue().Copy()
		}
		if _, set := spec["clusterIP"]; !set {
			spec["clusterIP"] = resource.NewProperty(fakeClusterIP)
		}
		state["spec"] = resource.NewProperty(spec)
		if t, ok := spec["type"]; ok && t.IsString() && t.StringValue() == "LoadBalancer" {
			// The cloud's load balancer controller gives it an address.
			ingress := r.lbIngress
			if ingress == nil {
				ingress = map[string]any{"ip": fakeLoadBalancerIP}
			}
			state["status"] = resource.NewPropertyValue(map[string]any{"loadBalancer": map[string]any{"ingress": []any{ingress}}})
		}
	}
	cloudState(args.TypeToken, state) // what a cloud reports once a resource exists (clouds_test.go)
	return args.Name + "-id", state, nil
}

func (r *recorder) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	r.mu.Lock()
	r.calls = append(r.calls, args.Token)
	r.mu.Unlock()
	return cloudCall(args), nil // the clouds' invokes (clouds_test.go)
}

// called reports whether the program invoked a function (a provider's token).
func (r *recorder) called(token string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.calls, token)
}

// sorted returns the registrations in a stable order (registration order varies with goroutines).
func (r *recorder) sorted() []registered {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]registered(nil), r.all...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ofType returns the registrations of one type token.
func (r *recorder) ofType(token string) []registered {
	var out []registered
	for _, rec := range r.sorted() {
		if rec.Type == token {
			out = append(out, rec)
		}
	}
	return out
}

// simulatedNodes are the Nodes the registered SimulatedNodePools ask the local cluster for, as
// hack/simpool makes them: <pool>-<i> for i below spec.nodes, each carrying the pool's template and
// its own hostname label. Each is returned as if registered, with the pool's resource name as its
// Parent (what depends on the pool waits for its nodes).
func (r *recorder) simulatedNodes() []registered {
	var out []registered
	for _, pool := range r.ofType(tPool) {
		in := inputs(pool)
		poolName, _ := get(in, "metadata", "name").(string)
		n, _ := get(in, "spec", "nodes").(float64)
		for i := 0; i < int(n); i++ {
			name := simapi.NodeName(poolName, i)
			labels := map[string]any{"kubernetes.io/hostname": name}
			if l, ok := get(in, "spec", "template", "metadata", "labels").(map[string]any); ok {
				for k, v := range l {
					labels[k] = v
				}
			}
			node := map[string]any{"metadata": map[string]any{
				"name": name, "labels": labels,
				"annotations": get(in, "spec", "template", "metadata", "annotations"),
			}}
			if taints := get(in, "spec", "template", "spec", "taints"); taints != nil {
				node["spec"] = map[string]any{"taints": taints}
			}
			out = append(out, registered{Type: "kubernetes:core/v1:Node", Name: name, Parent: pool.Name,
				Inputs: resource.NewPropertyMapFromMap(node)})
		}
	}
	return out
}

// one returns the single registration of a type and name, failing the test otherwise.
func (r *recorder) one(t *testing.T, token, name string) registered {
	t.Helper()
	for _, rec := range r.sorted() {
		if rec.Type == token && rec.Name == name {
			return rec
		}
	}
	t.Fatalf("no %s named %s registered", token, name)
	return registered{}
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
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with UPDATE_GOLDEN=1)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got); if the change is intended, UPDATE_GOLDEN=1 and review the diff:\n%s", path, d)
	}
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

// plain turns registered inputs into plain values for YAML, secrets replaced by a marker.
func plain(v resource.PropertyValue) any {
	switch {
	case v.IsSecret():
		return secretMarker
	case v.IsComputed() || (v.IsOutput() && !v.OutputValue().Known):
		return "[unknown]"
	case v.IsOutput():
		if v.OutputValue().Secret {
			return secretMarker
		}
		return plain(v.OutputValue().Element)
	case v.IsNull():
		return nil
	case v.IsBool():
		return v.BoolValue()
	case v.IsNumber():
		return v.NumberValue()
	case v.IsString():
		return v.StringValue()
	case v.IsArray():
		out := []any{}
		for _, e := range v.ArrayValue() {
			out = append(out, plain(e))
		}
		return out
	case v.IsObject():
		out := map[string]any{}
		for k, e := range v.ObjectValue() {
			out[string(k)] = plain(e)
		}
		return out
	case v.IsResourceReference():
		return "[resource " + string(v.ResourceReferenceValue().URN) + "]"
	}
	return fmt.Sprintf("[%s]", v.TypeString())
}

// goldenYAML renders every registration, in a stable order, as one YAML document each.
func goldenYAML(t *testing.T, rec *recorder) []byte {
	t.Helper()
	var b strings.Builder
	for _, r := range rec.sorted() {
		doc := map[string]any{
			"type":   r.Type,
			"name":   r.Name,
			"parent": r.Parent,
			"inputs": plain(resource.NewProperty(r.Inputs)),
		}
		if r.Protect {
			doc["protect"] = true
		}
		if r.DeleteBeforeReplace {
			doc["deleteBeforeReplace"] = true
		}
		if len(r.ReplaceOnChanges) > 0 {
			doc["replaceOnChanges"] = r.ReplaceOnChanges
		}
		if r.CreateTimeout != "" {
			doc["createTimeout"] = r.CreateTimeout
		}
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return []byte(b.String())
}

// get walks a path of object keys (and "[i]" indexes) through plain values.
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			var i int
			if _, err := fmt.Sscanf(p, "[%d]", &i); err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func inputs(r registered) any { return plain(resource.NewProperty(r.Inputs)) }

// gpuNodesSelected checks that a DaemonSet's node selector picks exactly the registered simulated
// nodes that have GPUs, and returns those nodes.
func gpuNodesSelected(t *testing.T, rec *recorder, what string, sel map[string]any) []registered {
	t.Helper()
	var gpu []registered
	for _, n := range rec.simulatedNodes() {
		md := get(inputs(n), "metadata")
		labels, _ := get(md, "labels").(map[string]any)
		selected := true
		for k, v := range sel {
			selected = selected && labels[k] == v
		}
		var capacity map[string]string
		if err := json.Unmarshal([]byte(get(md, "annotations", "kolotoc.dev/simulated-capacity").(string)), &capacity); err != nil {
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
