package tfcluster

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

// testArgs are the cluster's Args as the stack builds them for the dev stack, whose entrypoint
// runs TensorBoard (so the cluster runs none of its own); change applies to the section before
// its defaults are filled.
func testArgs(change func(c *Config)) *Args {
	c := NewConfig()
	c.Enabled = true
	c.TensorBoardImage = "tensorflow/tensorflow:2.17.0" // the stack fills it from the entrypoint's
	if change != nil {
		change(&c)
	}
	c.DefaultPools(rendertest.Pools())
	c.Default()
	a := &Args{
		Config: c, Site: rendertest.Site(), ScriptsName: ScriptsName,
		LogDir: "/shared/logs/tfcluster", CheckpointDir: "/shared/checkpoints/tfcluster",
	}
	a.Tasks = c.Tasks(nil)
	return a
}

func render(t *testing.T, a *Args) *rendertest.Recorder {
	t.Helper()
	return rendertest.Render(t, "tfcluster", a, New)
}

func TestRenderGolden(t *testing.T) {
	got := rendertest.GoldenYAML(t, render(t, testArgs(nil)))
	rendertest.CompareGolden(t, filepath.Join("testdata", "tfcluster.golden.yaml"), got)
}

// TestRenderFacts checks what users rely on in the rendered cluster.
func TestRenderFacts(t *testing.T) {
	// registered lists the names of the registrations of one type.
	registered := func(rec *rendertest.Recorder, token string) []string {
		var out []string
		for _, r := range rec.OfType(token) {
			out = append(out, r.Name)
		}
		return out
	}
	t.Run("a task type of count 0 registers nothing and is not in the cluster spec", func(t *testing.T) {
		for _, tc := range []struct {
			name         string
			change       func(c *Config)
			wantSets     []string
			wantPDBs     []string
			wantSpecKeys []string
		}{
			{"every role", nil,
				[]string{"tfcluster-chief", "tfcluster-evaluator", "tfcluster-ps", "tfcluster-worker"},
				[]string{"tfcluster-chief", "tfcluster-ps", "tfcluster-worker"}, // the evaluator is outside the spec: no budget
				[]string{"chief", "ps", "worker"}},
			{"no chief, no evaluator", func(c *Config) { c.Chief.Count, c.Evaluator.Count = 0, 0 },
				[]string{"tfcluster-ps", "tfcluster-worker"},
				[]string{"tfcluster-ps", "tfcluster-worker"},
				[]string{"ps", "worker"}},
		} {
			rec := render(t, testArgs(tc.change))
			var tfConfig map[string][]string
			worker := rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "tfcluster-worker"))
			for _, e := range rendertest.Get(worker, "spec", "template", "spec", "containers", "[0]", "env").([]any) {
				if rendertest.Get(e, "name") == ClusterEnv {
					if err := json.Unmarshal([]byte(rendertest.Get(e, "value").(string)), &tfConfig); err != nil {
						t.Fatal(err)
					}
				}
			}
			var specKeys []string
			for _, k := range []string{"chief", "evaluator", "ps", "worker"} {
				if len(tfConfig[k]) > 0 {
					specKeys = append(specKeys, k)
				}
			}
			got := [][]string{registered(rec, "kubernetes:apps/v1:StatefulSet"), registered(rec, "kubernetes:core/v1:Service"),
				registered(rec, "kubernetes:policy/v1:PodDisruptionBudget"), specKeys}
			want := [][]string{tc.wantSets, tc.wantSets, tc.wantPDBs, tc.wantSpecKeys}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: StatefulSets, Services, budgets, cluster spec's task types (-want +got):\n%s", tc.name, d)
			}
		}
	})
	t.Run("workers alone take GPUs; two workers in the spec", func(t *testing.T) {
		rec := render(t, testArgs(nil))
		type task struct {
			GPUs     any
			Tolerate bool
		}
		got := map[string]task{}
		for _, typ := range []string{TypeChief, TypeWorker, TypePS, TypeEvaluator} {
			pod := rendertest.Get(rendertest.Inputs(rec.One(t, "kubernetes:apps/v1:StatefulSet", "tfcluster-"+typ)), "spec", "template", "spec")
			got[typ] = task{
				GPUs:     rendertest.Get(pod, "containers", "[0]", "resources", "limits", meta.GPUResource),
				Tolerate: rendertest.Get(pod, "tolerations") != nil,
			}
		}
		want := map[string]task{TypeChief: {nil, false}, TypeWorker: {"4", true}, TypePS: {nil, false}, TypeEvaluator: {nil, false}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("GPU limit and toleration per task type (-want +got):\n%s", d)
		}
		wantWorkers := []string{"tf-worker-0.tf-worker.kolotoc-dev.svc:2222", "tf-worker-1.tf-worker.kolotoc-dev.svc:2222"}
		if d := cmp.Diff(wantWorkers, ClusterSpec(testArgs(nil))[TypeWorker]); d != "" {
			t.Errorf("workers in the cluster spec (-want +got):\n%s", d)
		}
	})
	t.Run("its own TensorBoard only when the entrypoint runs none", func(t *testing.T) {
		for _, own := range []bool{false, true} {
			a := testArgs(nil)
			if own {
				a.OwnTensorBoard = &TensorBoard{Name: "tf-tensorboard", Image: a.TensorBoardImage, Pool: "cpu", LogDir: "/shared/logs"}
			}
			var want []string
			if own {
				want = []string{"tfcluster-tensorboard"}
			}
			if d := cmp.Diff(want, registered(render(t, a), "kubernetes:apps/v1:Deployment")); d != "" {
				t.Errorf("own TensorBoard %v: Deployments (-want +got):\n%s", own, d)
			}
		}
	})
}

// TestReleaseTokenOnlyInTheChief: with onSuccess release only the chief's pod runs as the release
// account, and only its TensorFlow container mounts the token; the other task types hold none.
func TestReleaseTokenOnlyInTheChief(t *testing.T) {
	a := testArgs(func(c *Config) {
		c.OnSuccess = meta.OnSuccessRelease
		c.Chief.Count = 1
	})
	a.Tasks = a.Config.Tasks(nil)
	a.Site.Code = &meta.Code{Repository: "https://example.com/team/train.git", Ref: "main", Path: "/code", Image: "kolotoc/git:1"}
	rec := render(t, a)
	sets := rec.OfType("kubernetes:apps/v1:StatefulSet")
	if len(sets) < 2 {
		t.Fatalf("%d task StatefulSets, want the chief and others", len(sets))
	}
	for _, s := range sets {
		pod := rendertest.Get(rendertest.Inputs(s), "spec", "template", "spec")
		if s.Name == "tfcluster-"+TypeChief {
			rendertest.ReleaseToken(t, pod, releaseName(a), TypeChief)
		} else {
			rendertest.ReleaseToken(t, pod, "", "")
		}
	}
}
