package dask

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// renderPools are the stack's pools in these tests: a GPU pool first, then a CPU pool of 16 cores.
var renderPools = meta.Pools{{Name: "gpu", GPUsPerNode: 4, CPUs: 32}, {Name: "cpu", CPUs: 16}}

// scheduler is the entrypoint's scheduler as the stack names it (stacks/workloads/carriers.Args).
var scheduler = entrypoint.SchedulerAddress("entrypoint", "kolotoc-dev")

// carriersConfig is the carriers' section with change applied, then its defaults filled as the
// stack fills them.
func carriersConfig(change func(c *CarriersConfig)) CarriersConfig {
	c := NewCarriersConfig()
	if change != nil {
		change(&c)
	}
	c.DefaultPools(renderPools)
	c.Default()
	return c
}

// renderCarriers registers the carriers as the stack does (stacks/workloads/carriers.Args).
func renderCarriers(t *testing.T, c CarriersConfig) *rendertest.Recorder {
	t.Helper()
	a := &CarrierArgs{CarriersConfig: c, Site: rendertest.Site(), Name: CarrierName, Scheduler: scheduler}
	return rendertest.Render(t, "carriers", a, NewCarriers)
}

// renderSentinel registers a bare pod holding only the sentinel the stack adds beside each
// tower: the container is all dask renders of it (the ring renders the tower pod).
func renderSentinel(t *testing.T, s SentinelsConfig) *rendertest.Recorder {
	t.Helper()
	s.Default()
	c := Sentinel(s, carriersConfig(nil), scheduler, rendertest.Site(), "")
	return rendertest.Run(t, func(ctx *pulumi.Context) error {
		_, err := corev1.NewPod(ctx, "tower-sentinel", &corev1.PodArgs{
			Spec: &corev1.PodSpecArgs{Containers: corev1.ContainerArray{c}},
		})
		return err
	})
}

func TestRenderGolden(t *testing.T) {
	got := rendertest.GoldenYAML(t, renderCarriers(t, carriersConfig(nil)))
	rendertest.CompareGolden(t, filepath.Join("testdata", "carriers.golden.yaml"), got)
	got = rendertest.GoldenYAML(t, renderSentinel(t, SentinelsConfig{Enabled: true}))
	rendertest.CompareGolden(t, filepath.Join("testdata", "sentinel.golden.yaml"), got)
}

// flag is the argument after name in a container's args, nil when there is none.
func flag(container any, name string) any {
	args, _ := rendertest.Get(container, "args").([]any)
	if i := slices.Index(args, any(name)); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return nil
}

// TestRenderFacts checks what users rely on in the rendered carriers and sentinels.
func TestRenderFacts(t *testing.T) {
	carrier := func(c CarriersConfig) any {
		return rendertest.Inputs(renderCarriers(t, c).One(t, "kubernetes:apps/v1:StatefulSet", "carriers"))
	}
	t.Run("one carrier pod per count, on the first CPU pool", func(t *testing.T) {
		for _, count := range []int{1, 3} {
			sts := carrier(carriersConfig(func(c *CarriersConfig) { c.Count = count }))
			got := []any{rendertest.Get(sts, "spec", "replicas"), rendertest.Get(sts, "spec", "template", "spec", "nodeSelector", meta.PoolLabel)}
			if d := cmp.Diff([]any{float64(count), "cpu"}, got); d != "" {
				t.Errorf("count %d: replicas and pool (-want +got):\n%s", count, d)
			}
		}
	})
	t.Run("one worker process per core of the pool unless set, a core each, joined to the scheduler", func(t *testing.T) {
		for _, tc := range []struct {
			workers     int
			wantWorkers any
		}{{0, "16"}, {4, "4"}} {
			sts := carrier(carriersConfig(func(c *CarriersConfig) { c.WorkersPerCarrier = tc.workers }))
			w := rendertest.Get(sts, "spec", "template", "spec", "containers", "[0]")
			got := []any{flag(w, "--nworkers"), flag(w, "--nthreads"), rendertest.Get(w, "resources", "limits", "cpu"), flag(w, "worker")}
			want := []any{tc.wantWorkers, "1", tc.wantWorkers, scheduler}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("workersPerCarrier %d: --nworkers, --nthreads, CPU limit, scheduler (-want +got):\n%s", tc.workers, d)
			}
		}
	})
	t.Run("a sentinel is one process of its threads, joined to the entrypoint's scheduler", func(t *testing.T) {
		pod := rendertest.Inputs(renderSentinel(t, SentinelsConfig{Enabled: true, Threads: 3}).One(t, "kubernetes:core/v1:Pod", "tower-sentinel"))
		c := rendertest.Get(pod, "spec", "containers", "[0]")
		got := []any{flag(c, "worker"), flag(c, "--nworkers"), flag(c, "--nthreads"), rendertest.Get(c, "resources", "limits", "cpu"),
			rendertest.Get(c, "image"), rendertest.Get(c, "volumeMounts")}
		want := []any{"tcp://entrypoint.kolotoc-dev.svc:8786", "1", "3", "3", DefaultImage, []any{
			map[string]any{"name": "shared", "mountPath": "/shared"},
			map[string]any{"name": "scratch", "mountPath": "/scratch"},
		}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("scheduler, --nworkers, --nthreads, CPU limit, image, mounts (-want +got):\n%s", d)
		}
	})
}
