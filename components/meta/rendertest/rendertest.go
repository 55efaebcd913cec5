// Package rendertest renders components under Pulumi's mocks for their tests: a recording mock
// monitor that keeps every registration, a stable YAML rendering of what was registered (golden
// files, secrets shown only as a marker) and helpers to read the recorded inputs. Only tests
// import it: the components' own render tests and the whole-stack tests (package tests).
package rendertest

import (
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
	"gopkg.in/yaml.v3"

	"kolotoc/components/meta"
)

// What the mocked API server and cloud report once an object exists.
const (
	// FakeClusterIP is what the mock API server assigns to every ClusterIP Service.
	FakeClusterIP = "10.96.0.42"
	// FakeNamespaceUID is the UID the mocks give every Namespace.
	FakeNamespaceUID = "6f2c1d0e-namespace-uid"
	// FakeLoadBalancerIP is the address the mocked cloud gives every LoadBalancer Service.
	FakeLoadBalancerIP = "198.51.100.7"
	// SecretMarker stands for a secret value in Plain and GoldenYAML.
	SecretMarker = "[secret]"
)

// Project and Stack are the names Run gives the program.
const (
	Project = "kolotoc"
	Stack   = "dev"
)

// Resource is one resource as the program registered it.
type Resource struct {
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

// Recorder is a pulumi.MockResourceMonitor that keeps every registration and the token of every
// invoke. The zero Recorder is ready to use.
type Recorder struct {
	// LBIngress is the status.loadBalancer.ingress[0] of LoadBalancer Services; default
	// {ip: FakeLoadBalancerIP}.
	LBIngress map[string]any

	mu    sync.Mutex
	all   []Resource
	calls []string
}

// NewResource records the registration and answers with its inputs as its state, plus what the
// API server fills in: a Namespace's UID, a Service's ClusterIP and a LoadBalancer's ingress.
func (r *Recorder) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	rec := Resource{Type: args.TypeToken, Name: args.Name, Inputs: args.Inputs}
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
		md["uid"] = resource.NewProperty(FakeNamespaceUID)
		state["metadata"] = resource.NewProperty(md)
	}
	if args.TypeToken == "kubernetes:core/v1:Service" {
		// The API server assigns a ClusterIP; the storage component feeds it into the volume.
		spec := resource.PropertyMap{}
		if s, ok := state["spec"]; ok && s.IsObject() {
			spec = s.ObjectValue().Copy()
		}
		if _, set := spec["clusterIP"]; !set {
			spec["clusterIP"] = resource.NewProperty(FakeClusterIP)
		}
		state["spec"] = resource.NewProperty(spec)
		if t, ok := spec["type"]; ok && t.IsString() && t.StringValue() == "LoadBalancer" {
			// The cloud's load balancer controller gives it an address.
			ingress := r.LBIngress
			if ingress == nil {
				ingress = map[string]any{"ip": FakeLoadBalancerIP}
			}
			state["status"] = resource.NewPropertyValue(map[string]any{"loadBalancer": map[string]any{"ingress": []any{ingress}}})
		}
	}
	return args.Name + "-id", state, nil
}

// Call records the invoke's token and answers with no outputs.
func (r *Recorder) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	r.mu.Lock()
	r.calls = append(r.calls, args.Token)
	r.mu.Unlock()
	return resource.PropertyMap{}, nil
}

// Called reports whether the program invoked a function (a provider's token).
func (r *Recorder) Called(token string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.calls, token)
}

// Sorted returns the registrations in a stable order, by type then name (registration order
// varies with goroutines).
func (r *Recorder) Sorted() []Resource {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]Resource(nil), r.all...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// OfType returns the registrations of one type token, sorted by name.
func (r *Recorder) OfType(token string) []Resource {
	var out []Resource
	for _, rec := range r.Sorted() {
		if rec.Type == token {
			out = append(out, rec)
		}
	}
	return out
}

// One returns the single registration of a type and name, failing the test otherwise.
func (r *Recorder) One(t *testing.T, token, name string) Resource {
	t.Helper()
	for _, rec := range r.Sorted() {
		if rec.Type == token && rec.Name == name {
			return rec
		}
	}
	t.Fatalf("no %s named %s registered", token, name)
	return Resource{}
}

// Run runs body as a Pulumi program (project Project, stack Stack) under a new Recorder, joins
// the component outputs registered on goroutines (meta.WaitOutputs) and returns the Recorder.
// An error of the program fails the test.
func Run(t *testing.T, body func(ctx *pulumi.Context) error) *Recorder {
	t.Helper()
	rec := &Recorder{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		if err := body(ctx); err != nil {
			return err
		}
		return meta.WaitOutputs(ctx)
	}, pulumi.WithMocks(Project, Stack, rec))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Render registers one component, newComponent(ctx, name, args), under Run: what a component's
// render test compares.
func Render[A, C any](t *testing.T, name string, args A, newComponent func(*pulumi.Context, string, A, ...pulumi.ResourceOption) (C, error)) *Recorder {
	t.Helper()
	return Run(t, func(ctx *pulumi.Context) error {
		_, err := newComponent(ctx, name, args)
		return err
	})
}

// Plain turns registered inputs into plain values for YAML, secrets replaced by SecretMarker.
func Plain(v resource.PropertyValue) any {
	switch {
	case v.IsSecret():
		return SecretMarker
	case v.IsComputed() || (v.IsOutput() && !v.OutputValue().Known):
		return "[unknown]"
	case v.IsOutput():
		if v.OutputValue().Secret {
			return SecretMarker
		}
		return Plain(v.OutputValue().Element)
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
			out = append(out, Plain(e))
		}
		return out
	case v.IsObject():
		out := map[string]any{}
		for k, e := range v.ObjectValue() {
			out[string(k)] = Plain(e)
		}
		return out
	case v.IsResourceReference():
		return "[resource " + string(v.ResourceReferenceValue().URN) + "]"
	}
	return fmt.Sprintf("[%s]", v.TypeString())
}

// Inputs are a registration's inputs as plain values (Plain).
func Inputs(r Resource) any { return Plain(resource.NewProperty(r.Inputs)) }

// Get walks a path of object keys (and "[i]" indexes) through plain values; nil where the path
// leads nowhere.
func Get(v any, path ...string) any {
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

// GoldenYAML renders every registration, sorted by type then name, as one YAML document each:
// its type, name, parent and plain inputs (Plain), and the options that are set among protect,
// deleteBeforeReplace, replaceOnChanges and createTimeout. The keys of each document are in
// yaml.v3's order (alphabetical).
func GoldenYAML(t *testing.T, rec *Recorder) []byte {
	t.Helper()
	var b strings.Builder
	for _, r := range rec.Sorted() {
		doc := map[string]any{
			"type":   r.Type,
			"name":   r.Name,
			"parent": r.Parent,
			"inputs": Plain(resource.NewProperty(r.Inputs)),
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

// CompareGolden compares got with the golden file at path, which UPDATE_GOLDEN=1 rewrites first.
func CompareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
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

// Site is the site the components' render tests give a workload, as the stack builds it for the
// dev stack (stacks.workloadSite): namespace kolotoc-dev, the shared claim at /shared, an
// emptyDir scratch of 50Gi at /scratch.
func Site() meta.Site {
	return meta.Site{
		Namespace: pulumi.String("kolotoc-dev"), NamespaceDNS: "kolotoc-dev",
		Labels: meta.Labels{Instance: "dev", Version: "test"},
		Claim:  "shared", MountPath: "/shared",
		Scratch: meta.Scratch{SizeLimit: "50Gi", MountPath: "/scratch"},
	}
}

// Pools are the node pools the components' render tests take their pool defaults from: a GPU
// pool first (4 GPUs and 32 cores a node), then a CPU pool (16 cores).
func Pools() meta.Pools {
	return meta.Pools{{Name: "gpu", GPUsPerNode: 4, CPUs: 32}, {Name: "cpu", CPUs: 16}}
}

// NoSecretIn fails the test if any of secrets (non-empty) appears in got: a secret input must
// reach the golden, and the state, only as SecretMarker.
func NoSecretIn(t *testing.T, got []byte, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s == "" {
			t.Fatal("NoSecretIn: an empty secret matches everything")
		}
		if strings.Contains(string(got), s) {
			t.Errorf("a secret (%.8s…) is in the rendered inputs in plain text", s)
		}
	}
}

// ReleaseToken checks a pod spec's service-account token: with account set, the pod runs as that
// account with automount off, and the projected release-token volume (meta.ReleaseTokenVolume) is
// mounted read-only at the token path into the container named holder only, never into an init
// container or another container; with account "", no container holds a token.
func ReleaseToken(t *testing.T, pod any, account, holder string) {
	t.Helper()
	if Get(pod, "automountServiceAccountToken") != false {
		t.Errorf("automountServiceAccountToken %v: want false, the token mounted where it is needed only", Get(pod, "automountServiceAccountToken"))
	}
	if account != "" && Get(pod, "serviceAccountName") != account {
		t.Errorf("service account %v, want %s", Get(pod, "serviceAccountName"), account)
	}
	mounted := func(c any) bool {
		mounts, _ := Get(c, "volumeMounts").([]any)
		for _, m := range mounts {
			if Get(m, "name") == "release-token" {
				if Get(m, "mountPath") != meta.ReleaseTokenPath || Get(m, "readOnly") != true {
					t.Errorf("container %v mounts the token at %v (read-only %v)", Get(c, "name"), Get(m, "mountPath"), Get(m, "readOnly"))
				}
				return true
			}
		}
		return false
	}
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := Get(pod, list).([]any)
		for _, c := range cs {
			want := account != "" && list == "containers" && Get(c, "name") == holder
			if got := mounted(c); got != want {
				t.Errorf("%s %v mounts the release token: %v, want %v", list, Get(c, "name"), got, want)
			}
		}
	}
	if account == "" {
		return
	}
	vols, _ := Get(pod, "volumes").([]any)
	for _, v := range vols {
		if Get(v, "name") == "release-token" {
			if Get(v, "projected", "sources", "[0]", "serviceAccountToken", "path") != "token" {
				t.Errorf("release-token volume %v: want the projected bound token", v)
			}
			return
		}
	}
	t.Error("no release-token volume")
}
