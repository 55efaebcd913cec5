package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"kolotoc/components/cluster"
	"kolotoc/components/meta"
	"kolotoc/stacks"
)

// fitLayouts are the stack files `make fit` mirrors, as cmd/fit rewrites them: the simulated
// cloud, kolotoc:fit on.
var fitLayouts = []struct{ name, file string }{
	{"prod", "../Pulumi.prod.yaml"},
	{"aws", "../examples/aws/Pulumi.aws.yaml"},
	{"azure", "../examples/azure/Pulumi.azure.yaml"},
	{"gpu-dev", "../examples/gpu-dev/Pulumi.gpu-dev.yaml"},
	{"workloads", "../examples/workloads/Pulumi.workloads.yaml"},
}

func fitRaw(t *testing.T, file, name string, fit bool) stacks.Raw {
	t.Helper()
	raw, err := stacks.ReadStackFile(file, "kolotoc", "fit-"+name, "")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"jupyterPassword": testPassword, "sshKeySeed": testSeed, "grafanaPassword": grafanaTestPassword} {
		raw.Values["kolotoc:"+k] = v
		raw.Secrets["kolotoc:"+k] = true
	}
	raw.Values["kolotoc:cloud"] = stacks.CloudSimulated
	cluster := map[string]any{}
	if v, ok := raw.Values["kolotoc:cluster"]; ok {
		if err := json.Unmarshal([]byte(v), &cluster); err != nil {
			t.Fatal(err)
		}
	}
	cluster["name"], cluster["kubeconfig"] = "fit-"+name, fakeKubeconfig(t)
	b, _ := json.Marshal(cluster)
	raw.Values["kolotoc:cluster"] = string(b)
	if fit {
		raw.Values["kolotoc:fit"] = "true"
	}
	return raw
}

// TestFitSkipsEveryAwait: on a fit stack, every object whose readiness the Kubernetes provider
// would await carries pulumi.com/skipAwait, so that `pulumi up` of an environment that does not
// fit returns at once instead of waiting out the timeouts; its other annotations stay. Without
// kolotoc:fit only the launcher (a training run) and in-cluster Services
// (TestInClusterServicesNotAwaited) skip the wait.
func TestFitSkipsEveryAwait(t *testing.T) {
	for _, l := range fitLayouts {
		t.Run(l.name, func(t *testing.T) {
			for _, fit := range []bool{true, false} {
				rec := deploy(t, fitRaw(t, l.file, l.name, fit))
				awaited := 0
				for _, r := range rec.sorted() {
					if r.Type == tPool {
						// The nodes are awaited on every stack: the scheduler must judge the pods
						// against all of them, not against the few made before the pods.
						if ann, _ := get(inputs(r), "metadata", "annotations").(map[string]any); ann[meta.WaitForAnnotation] != "condition=Ready" || ann[stacks.SkipAwaitAnnotation] != nil {
							t.Errorf("fit=%v: pool %s annotations %v: it must be awaited by its Ready condition", fit, r.Name, ann)
						}
					}
					if !slices.Contains(stacks.FitAwaitedTypes, r.Type) {
						if v := get(inputs(r), "metadata", "annotations", stacks.SkipAwaitAnnotation); v != nil {
							t.Errorf("fit=%v: %s %s has skipAwait = %v: only awaited types need it", fit, r.Type, r.Name, v)
						}
						continue
					}
					awaited++
					ann, _ := get(inputs(r), "metadata", "annotations").(map[string]any)
					skip := ann[stacks.SkipAwaitAnnotation] == "true"
					switch {
					case fit && !skip:
						t.Errorf("fit stack: %s %s has no skipAwait (annotations %v): pulumi up would wait for it", r.Type, r.Name, ann)
					case !fit && skip && !(r.Type == tJob && r.Name == "towers-launcher") && r.Type != tService:
						t.Errorf("stack without kolotoc:fit: %s %s skips the readiness wait", r.Type, r.Name)
					}
					if fit && r.Type != tJob && ann["pulumi.com/patchForce"] != "true" {
						t.Errorf("fit stack: %s %s lost its other annotations: %v", r.Type, r.Name, ann)
					}
				}
				if awaited < 5 {
					t.Errorf("fit=%v: only %d awaited objects registered", fit, awaited)
				}
			}
		})
	}
}

// TestNoCommittedStackSetsFit: kolotoc:fit is make fit's, written into its throw-away config under
// .kolotoc/fit/ only; no stack file of the repository may carry it (validation also refuses it on
// every cloud but simulated and beside a real pool).
func TestNoCommittedStackSetsFit(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../Pulumi.*.yaml", "../examples/*/Pulumi.*.yaml", "e2e/testdata/Pulumi.*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("only %d stack files found: %v", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Config map[string]any `yaml:"config"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for k := range doc.Config {
			if strings.EqualFold(k, stacks.ConfigNamespace+":fit") {
				t.Errorf("%s sets %s: only make fit's throw-away stacks may", f, k)
			}
		}
	}
}

// TestFitGrowthFromZero: the mirror make fit deploys of each cloud layout, its GPU pool turned into
// a pool at zero (minNodes: 0, maxNodes: the nodes it had), is accepted on the simulated cloud as a
// Karpenter NodePool, and exports the growth make fit reports: the GPU pool grows from zero to
// the nodes the towers take, within maxNodes. A stack without kolotoc:fit exports no growth.
func TestFitGrowthFromZero(t *testing.T) {
	for _, l := range fitLayouts[:3] { // the cloud layouts: prod, aws, azure
		t.Run(l.name, func(t *testing.T) {
			raw := fitRaw(t, l.file, l.name, true)
			var pools []map[string]any
			if err := json.Unmarshal([]byte(raw.Values["kolotoc:nodePools"]), &pools); err != nil {
				t.Fatal(err)
			}
			maxNodes := 0.0
			for _, p := range pools {
				if p["name"] == "gpu" {
					maxNodes = p["nodes"].(float64)
					delete(p, "nodes")
					p["minNodes"], p["maxNodes"] = 0, maxNodes
				}
			}
			b, _ := json.Marshal(pools)
			raw.Values["kolotoc:nodePools"] = string(b)
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatalf("the mirror of a pool at zero is refused: %v", err)
			}
			rec, outs := deployOutputs(t, raw)
			if n := len(rec.ofType(cluster.NodePoolType)); n != 1 {
				t.Errorf("%d Karpenter NodePools registered, want the GPU pool's", n)
			}
			text, _ := outs[stacks.GrowthOutput].value.(string)
			var g stacks.Growth
			if err := json.Unmarshal([]byte(text), &g); err != nil {
				t.Fatalf("output %s %q: %v", stacks.GrowthOutput, text, err)
			}
			var gpu *stacks.PoolGrowth
			for i := range g.Pools {
				if g.Pools[i].Pool == "gpu" {
					gpu = &g.Pools[i]
				}
			}
			towers := cfg.Towers.Count * cfg.Towers.GPUsPerTower / cfg.Pool("gpu").GPUsPerNode
			if gpu == nil || !gpu.Karpenter || gpu.Nodes != 0 || gpu.MaxNodes != int(maxNodes) || gpu.Needs != towers || gpu.Unplaced != 0 {
				t.Errorf("growth of the GPU pool %+v: want Karpenter's, 0 → %d nodes within %v", gpu, towers, maxNodes)
			}
			if _, outs := deployOutputs(t, fitRaw(t, l.file, l.name, false)); outs[stacks.GrowthOutput].value != nil {
				t.Errorf("a stack without kolotoc:fit exports %s", stacks.GrowthOutput)
			}
		})
	}
}
