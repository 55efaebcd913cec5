package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

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
