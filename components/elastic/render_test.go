package elastic

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kolotoc/components/etcd"
	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// renderPools are the stack's pools in these tests: a CPU pool, then a GPU pool of 4 GPUs and
// 32 cores per node.
var renderPools = meta.Pools{{Name: "cpu", CPUs: 16}, {Name: "gpu", GPUsPerNode: 4, CPUs: 32}}

// testArgs are the workers' Args as the stack builds them (stacks/workloads/elastic.Args) for the dev
// stack, with change applied to the section before its defaults are filled.
func testArgs(change func(c *Config)) *Args {
	c := NewConfig()
	c.Enabled = true
	c.RdzvID = "kolotoc-dev" // the stack fills it from its name
	if change != nil {
		change(&c)
	}
	c.DefaultPools(renderPools)
	c.Default()
	a := &Args{
		Config: c, Site: rendertest.Site(), Name: Name,
		CPULimit:      "32", // the GPU pool's cores for its 4 GPUs (stacks.gpuShareCPULimit)
		CheckpointDir: "/shared/checkpoints/" + c.RdzvID,
	}
	if c.RdzvBackend != BackendC10d {
		a.EtcdEndpoint = etcd.ClientEndpoint("etcd", "kolotoc-dev")
	}
	return a
}

func render(t *testing.T, a *Args) *rendertest.Recorder {
	t.Helper()
	return rendertest.Render(t, "elastic", a, New)
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend string
	}{{"c10d", BackendC10d}, {"etcd-v2", BackendEtcdV2}} {
		t.Run(tc.name, func(t *testing.T) {
			a := testArgs(func(c *Config) { c.RdzvBackend, c.MinNodes, c.MaxNodes = tc.backend, 1, 3 })
			got := rendertest.GoldenYAML(t, render(t, a))
			rendertest.CompareGolden(t, filepath.Join("testdata", tc.name+".golden.yaml"), got)
		})
	}
}

// torchrunFlag is the value of torchrun's --name=value among the worker's args, nil without it.
func torchrunFlag(worker any, name string) any {
	args, _ := rendertest.Get(worker, "args").([]any)
	if i := slices.IndexFunc(args, func(a any) bool { s, _ := a.(string); return strings.HasPrefix(s, name+"=") }); i >= 0 {
		return strings.TrimPrefix(args[i].(string), name+"=")
	}
	return nil
}

// TestRenderFacts checks what users rely on in the rendered workers.
func TestRenderFacts(t *testing.T) {
	t.Run("replicas are nodes, none when suspended; --nnodes is min:max", func(t *testing.T) {
		for _, tc := range []struct {
			min, max, nodes int
			suspend         bool
			wantReplicas    float64
			wantNNodes      string
			wantUnavailable float64
		}{
			{1, 1, 0, false, 1, "1:1", 0},
			{2, 4, 3, false, 3, "2:4", 1},
			{2, 4, 3, true, 0, "2:4", 1},
		} {
			a := testArgs(func(c *Config) { c.MinNodes, c.MaxNodes, c.Nodes = tc.min, tc.max, tc.nodes })
			a.Suspend = tc.suspend
			rec := render(t, a)
			got := []any{
				rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "elastic")), "spec", "replicas"),
				rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:core/v1:ConfigMap", "elastic-scale")), "data", NNodesKey),
				rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:policy/v1:PodDisruptionBudget", "elastic")), "spec", "maxUnavailable"),
			}
			want := []any{tc.wantReplicas, tc.wantNNodes, tc.wantUnavailable}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%+v: replicas, scale ConfigMap's nnodes, PDB maxUnavailable (-want +got):\n%s", tc, d)
			}
		}
	})
	t.Run("c10d meets at worker 0, etcd backends at the etcd Service", func(t *testing.T) {
		for _, tc := range []struct {
			backend, wantEndpoint string
		}{
			{BackendC10d, "elastic-0.elastic.kolotoc-dev.svc:29400"},
			{BackendEtcdV2, etcd.ClientEndpoint("etcd", "kolotoc-dev")},
		} {
			sts := rendertest.Inputs(render(t, testArgs(func(c *Config) { c.RdzvBackend = tc.backend })).One(t, "kubernetes:apps/v1:StatefulSet", "elastic"))
			w := rendertest.Get(sts, "spec", "template", "spec", "containers", "[0]")
			got := []any{torchrunFlag(w, "--rdzv_backend"), torchrunFlag(w, "--rdzv_endpoint"), torchrunFlag(w, "--rdzv_id"), torchrunFlag(w, "--nproc_per_node")}
			if d := cmp.Diff([]any{tc.backend, tc.wantEndpoint, "kolotoc-dev", "4"}, got); d != "" {
				t.Errorf("%s: --rdzv_backend, --rdzv_endpoint, --rdzv_id, --nproc_per_node (-want +got):\n%s", tc.backend, d)
			}
		}
	})
}

// TestReleaseTokenOnlyInTheWorkerContainer: with onSuccess release every worker may release (any
// of them can be the one whose torchrun ends the run), so each pod runs as the release account,
// but the token is mounted into the worker container alone, never into the code clone.
func TestReleaseTokenOnlyInTheWorkerContainer(t *testing.T) {
	a := testArgs(func(c *Config) { c.OnSuccess = meta.OnSuccessRelease })
	a.Site.Code = &meta.Code{Repository: "https://example.com/team/train.git", Ref: "main", Path: "/code", Image: "kolotoc/git:1"}
	pod := rendertest.Get(rendertest.Inputs(render(t, a).One(t, "kubernetes:apps/v1:StatefulSet", Name)), "spec", "template", "spec")
	if inits, _ := rendertest.Get(pod, "initContainers").([]any); len(inits) == 0 {
		t.Fatal("no init container: the code clone is missing from the test")
	}
	rendertest.ReleaseToken(t, pod, Name+"-release", workerContainer)
	pod = rendertest.Get(rendertest.Inputs(render(t, testArgs(nil)).One(t, "kubernetes:apps/v1:StatefulSet", Name)), "spec", "template", "spec")
	rendertest.ReleaseToken(t, pod, "", "")
}

// queuedArgs are the workers queued at minNodes 2 of 4 running (stacks.elasticQueue).
func queuedArgs() *Args {
	a := testArgs(func(c *Config) { c.MinNodes, c.MaxNodes, c.Nodes, c.OnSuccess = 2, 4, 4, meta.OnSuccessRelease })
	a.Queue = &meta.SetGang{Queue: "kolotoc"}
	a.ExtraPriority = "kolotoc-dev-elastic-extra"
	return a
}

// TestQueuedWorkerN: worker N's printed name is the pod's, in the group's set below minNodes
// and in the extras' above, through bash as a user runs it; unqueued, one set holds them all.
func TestQueuedWorkerN(t *testing.T) {
	for _, tc := range []struct {
		a    *Args
		n    string
		want string
	}{
		{queuedArgs(), "", "elastic-0"}, {queuedArgs(), "1", "elastic-1"}, {queuedArgs(), "2", "elastic-extra-2"}, {queuedArgs(), "3", "elastic-extra-3"},
		{testArgs(nil), "3", "elastic-3"},
	} {
		out, err := exec.Command("bash", "-c", "N="+tc.n+"; echo "+PodN(tc.a)).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("N=%q: %q (%v), want %s", tc.n, got, err, tc.want)
		}
	}
}

// TestQueuedSets: queued, the first set holds minNodes workers and the extras the rest from
// ordinal minNodes; both are suspended to none; unqueued, no extra set.
func TestQueuedSets(t *testing.T) {
	rec := render(t, queuedArgs())
	core := rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "elastic"))
	extra := rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "elastic-extra"))
	got := []any{rendertest.Get(core, "spec", "replicas"), rendertest.Get(extra, "spec", "replicas"), rendertest.Get(extra, "spec", "ordinals", "start")}
	if d := cmp.Diff([]any{2.0, 2.0, 2.0}, got); d != "" {
		t.Errorf("group replicas, extras' replicas, extras' first ordinal (-want +got):\n%s", d)
	}
	s := queuedArgs()
	s.Suspend = true
	rec = render(t, s)
	for _, n := range []string{"elastic", "elastic-extra"} {
		if r := rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", n)), "spec", "replicas"); r != 0.0 {
			t.Errorf("suspended: %s has %v replicas", n, r)
		}
	}
	// The first set is queued as one unit by Kueue's StatefulSet integration (the queue on the
	// set itself, replaced on any change of its spec); the extras are not (each of their pods is
	// queued alone: the queue on the pods only).
	rec = render(t, queuedArgs())
	first := rec.One(t, "kubernetes:apps/v1:StatefulSet", "elastic")
	if q := rendertest.Get(rendertest.Inputs(first), "metadata", "labels", meta.QueueNameLabel); q != "kolotoc" ||
		!first.DeleteBeforeReplace || !slices.Equal(first.ReplaceOnChanges, meta.QueuedSetReplaceOn) {
		t.Errorf("queued first set: queue label %v, deleteBeforeReplace %v, replaceOnChanges %v; want kolotoc, true, %v",
			q, first.DeleteBeforeReplace, first.ReplaceOnChanges, meta.QueuedSetReplaceOn)
	}
	ex := rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "elastic-extra"))
	if q := rendertest.Get(ex, "metadata", "labels", meta.QueueNameLabel); q != nil {
		t.Errorf("the extras' StatefulSet names queue %v: Kueue would admit them as one unit", q)
	}
	if q := rendertest.Get(ex, "spec", "template", "metadata", "labels", meta.QueueNameLabel); q != "kolotoc" {
		t.Errorf("the extras' pods name queue %v, want kolotoc", q)
	}
	if n := len(render(t, testArgs(func(c *Config) { c.MinNodes, c.MaxNodes = 2, 4 })).OfType("kubernetes:apps/v1:StatefulSet")); n != 1 {
		t.Errorf("unqueued: %d StatefulSets, want 1", n)
	}
}
