package storage

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// registration is what the mock saw of one resource: its type and name, the resources it depends
// on (type::name) and its inputs.
type registration struct {
	deps   []string
	inputs resource.PropertyMap
}

type mocks struct {
	mu  sync.Mutex
	reg map[string]registration // "type::name"
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	r := registration{inputs: args.Inputs}
	for _, urn := range args.RegisterRPC.GetDependencies() {
		parts := strings.Split(urn, "::")
		typ := parts[len(parts)-2]
		if i := strings.LastIndex(typ, "$"); i >= 0 {
			typ = typ[i+1:]
		}
		r.deps = append(r.deps, typ+"::"+parts[len(parts)-1])
	}
	m.mu.Lock()
	m.reg[args.TypeToken+"::"+args.Name] = r
	m.mu.Unlock()
	state := args.Inputs.Copy()
	if args.TypeToken == "kubernetes:core/v1:Service" {
		spec := state["spec"].ObjectValue()
		spec["clusterIP"] = resource.NewStringProperty("10.96.0.42")
		state["spec"] = resource.NewObjectProperty(spec)
	}
	return args.Name + "-id", state, nil
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// TestInClusterServerGatesThePods: every pod that mounts the claim waits for the NFS server's
// Deployment (its readiness probe: NFS answers) and the claim, never less, and the server's
// Service is not waited for: a waited-for Service is ready only 10 s after its endpoints settle,
// which delayed every pod that mounts the volume (bench/scale measured it on the critical path of
// every first deployment). The volume and the claim are made beside the server, not after it, and
// do not wait for the pool the server's pod runs on (PodDeps): only the store's own pods do, the
// owner Job too. bench/scale measured the chain pool → server → volume → claim on the way to
// every workload; the volume depended on the server, and the server on every pool.
func TestInClusterServerGatesThePods(t *testing.T) {
	m := &mocks{reg: map[string]registration{}}
	var ready []string
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		pool := &pulumi.CustomResourceState{} // stands for the SimulatedNodePool the server runs on
		if err := ctx.RegisterResource("kolotoc:test:Pool", "cpu", nil, pool); err != nil {
			return err
		}
		s, err := New(ctx, "storage", &Args{
			Namespace: pulumi.String("kolotoc-dev"), NamespaceDNS: "kolotoc-dev", VolumeName: "kolotoc-dev-shared",
			ClaimName: "shared", InCluster: true, Path: "/", Size: "10Gi", ServerImage: "nfs:1",
			Labels: meta.Labels{Instance: "dev"}, Owner: &Owner{UID: 1000, Image: "towers:1", Pool: "cpu"},
			PodDeps: []pulumi.Resource{pool},
		})
		if err != nil {
			return err
		}
		var mu sync.Mutex
		for _, r := range s.Ready {
			r.URN().ApplyT(func(u pulumi.URN) error {
				mu.Lock()
				defer mu.Unlock()
				parts := strings.Split(string(u), "::")
				typ := parts[len(parts)-2]
				ready = append(ready, typ[strings.LastIndex(typ, "$")+1:]+"::"+parts[len(parts)-1])
				return nil
			})
		}
		return nil
	}, pulumi.WithMocks("kolotoc", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := m.reg["kubernetes:core/v1:Service::storage-server"]
	if !ok {
		t.Fatalf("no server Service among %v", keys(m.reg))
	}
	ann := svc.inputs["metadata"].ObjectValue()["annotations"].ObjectValue()
	if v := ann[meta.SkipAwaitAnnotation]; !v.IsString() || v.StringValue() != "true" {
		t.Errorf("the server's Service is waited for (annotations %v)", ann)
	}
	const (
		server = "kubernetes:apps/v1:Deployment::storage-server"
		claim  = "kubernetes:core/v1:PersistentVolumeClaim::storage"
		volume = "kubernetes:core/v1:PersistentVolume::storage"
		owner  = "kubernetes:batch/v1:Job::storage-owner"
		pool   = "kolotoc:test:Pool::cpu"
	)
	slices.Sort(ready)
	if want := []string{server, owner, claim}; !slices.Equal(ready, want) {
		t.Errorf("pods that mount the claim wait for %v, want %v", ready, want)
	}
	for name, want := range map[string][]string{server: {pool}, owner: {pool, server, claim}} {
		for _, dep := range want {
			if !slices.Contains(m.reg[name].deps, dep) {
				t.Errorf("%s does not wait for %s: depends on %v", name, dep, m.reg[name].deps)
			}
		}
	}
	for _, name := range []string{volume, claim} {
		for _, dep := range []string{server, pool} {
			if slices.Contains(m.reg[name].deps, dep) {
				t.Errorf("%s waits for %s: it is made beside the server, and needs no node", name, dep)
			}
		}
	}
	nfs := m.reg[volume].inputs["spec"].ObjectValue()["nfs"].ObjectValue()
	if got := nfs["server"].StringValue(); got != "10.96.0.42" {
		t.Errorf("the volume's server is %q, want the Service's ClusterIP", got)
	}
}

func keys(m map[string]registration) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestClaimIsTheResourceToWaitFor: Storage.Claim is the PersistentVolumeClaim itself, which pods
// depend on. A dependency on the component could miss it: the SDK records a child from its
// registration goroutine, after New has returned.
func TestClaimIsTheResourceToWaitFor(t *testing.T) {
	m := &mocks{reg: map[string]registration{}}
	var urn pulumi.URN
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		s, err := New(ctx, "storage", &Args{
			Namespace: pulumi.String("kolotoc-dev"), NamespaceDNS: "kolotoc-dev", VolumeName: "kolotoc-dev-shared",
			ClaimName: "shared", InCluster: true, Path: "/", Size: "10Gi", ServerImage: "nfs:1",
			Labels: meta.Labels{Instance: "dev"},
		})
		if err != nil {
			return err
		}
		if s.Claim == nil {
			t.Fatal("Storage.Claim is nil")
		}
		s.Claim.URN().ApplyT(func(u pulumi.URN) error { urn = u; return nil })
		return nil
	}, pulumi.WithMocks("kolotoc", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(urn), "kubernetes:core/v1:PersistentVolumeClaim::storage") {
		t.Errorf("Storage.Claim is %s, want the PersistentVolumeClaim", urn)
	}
}
