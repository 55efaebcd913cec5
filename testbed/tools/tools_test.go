package tools

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"kolotoc/components/queue"
)

// TestGoBinName: testbed/tools/tools.sh builds several packages with one `go build -o DIR/` and
// must find each binary under the name go gives it. A package path ending in a major-version suffix
// is named after the element before it: the cold build of etcd (go.etcd.io/etcd/server/v3, binary
// "server") failed when the script looked for "v3".
func TestGoBinName(t *testing.T) {
	// Read by the test itself, so that go test's cache knows the result depends on it.
	if _, err := os.ReadFile("tools.sh"); err != nil {
		t.Fatal(err)
	}
	for pkg, want := range map[string]string{
		"go.etcd.io/etcd/server/v3":                  "server",
		"github.com/pulumi/pulumi/pkg/v3/cmd/pulumi": "pulumi",
		"sigs.k8s.io/kwok/cmd/kwokctl":               "kwokctl",
		"k8s.io/kubernetes/cmd/kube-apiserver":       "kube-apiserver",
		"kolotoc.dev/testbed/tools/coredns":          "coredns",
		"example.com/tool/v10":                       "tool",
		"example.com/v2x":                            "v2x",
	} {
		out, err := exec.Command("bash", "tools.sh", "--bin-name", pkg).Output()
		if err != nil {
			t.Fatalf("tools.sh --bin-name %s: %v", pkg, err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("binary of %s: %q, want %q", pkg, got, want)
		}
	}
}

// TestKubernetesSDKMatchesProvider: the CLI warns ("resource plugin kubernetes is expected to have
// version >=X") when the Kubernetes SDK the program links is newer than the provider plugin it
// runs. The plugin testbed/tools/tools.sh builds is release KUBERNETES_PROVIDER_VERSION; the
// product's go.mod must pin github.com/pulumi/pulumi-kubernetes/sdk/v4 at that same release, and
// the wrapper module must pin the provider's module at the pseudo-version of that release's commit.
func TestKubernetesSDKMatchesProvider(t *testing.T) {
	script, err := os.ReadFile("tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBERNETES_PROVIDER_VERSION=(v\S+)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("tools.sh sets no KUBERNETES_PROVIDER_VERSION")
	}
	release := string(m[1])

	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	sdk := regexp.MustCompile(`(?m)^\s*github\.com/pulumi/pulumi-kubernetes/sdk/v4 (v\S+)`).FindSubmatch(gomod)
	if sdk == nil {
		t.Fatal("go.mod does not require github.com/pulumi/pulumi-kubernetes/sdk/v4")
	}
	if got := string(sdk[1]); got != release {
		t.Errorf("go.mod pins the Kubernetes SDK at %s but testbed/tools/tools.sh builds provider %s: every pulumi command would warn that the plugin is too old", got, release)
	}

	// The commit each served provider release was cut from (git describe in pulumi-kubernetes):
	// the module proxy serves the provider module only by pseudo-version.
	commits := map[string]string{"v4.25.0": "v4.0.0-20260115033456-f47bc2d6f199"}
	wrapper, err := os.ReadFile("kubernetes/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	prov := regexp.MustCompile(`(?m)^(?:require)?\s*github\.com/pulumi/pulumi-kubernetes/provider/v4 (v\S+)`).FindSubmatch(wrapper)
	if prov == nil {
		t.Fatal("testbed/tools/kubernetes/go.mod does not require the provider module")
	}
	if want, ok := commits[release]; !ok {
		t.Errorf("no known commit for provider release %s: add it to this test after checking `git describe` upstream", release)
	} else if got := string(prov[1]); got != want {
		t.Errorf("testbed/tools/kubernetes/go.mod pins the provider at %s, which is not release %s (%s)", got, release, want)
	}
}

// TestWrappersPinTheCachedVersions: testbed/tools/tools.sh keys the cache directory of a tool
// built from an upstream module by its VERSION variable, but what it builds is the version the
// tool's wrapper module requires, and the test bed takes that module's manifests beside the binary
// (Kueue's CRDs and webhooks, Karpenter's CRDs, Cilium's CRDs and datapath sources). Were they to
// differ, a cached binary of one version would run against the manifests of another. The wrapper
// must also name the tool's packages (`tool` directives), or go mod tidy would drop the module.
func TestWrappersPinTheCachedVersions(t *testing.T) {
	script, err := os.ReadFile("tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, variable, module string
		tools                 []string
		clouds                string // the release the stack installs on the clouds, if it does
	}{
		{"kueue", "KUEUE_VERSION", "sigs.k8s.io/kueue", []string{"sigs.k8s.io/kueue/cmd/kueue"}, queue.KueueVersion},
		{"karpenter", "KARPENTER_VERSION", "sigs.k8s.io/karpenter", []string{"sigs.k8s.io/karpenter/kwok"}, ""},
		{"cilium", "CILIUM_VERSION", "github.com/cilium/cilium", []string{"github.com/cilium/cilium/daemon", "github.com/cilium/cilium/plugins/cilium-cni"}, ""},
	} {
		m := regexp.MustCompile(`(?m)^` + c.variable + `=(v\S+)$`).FindSubmatch(script)
		if m == nil {
			t.Errorf("tools.sh sets no %s", c.variable)
			continue
		}
		wrapper, err := os.ReadFile(c.dir + "/go.mod")
		if err != nil {
			t.Error(err)
			continue
		}
		mod := regexp.MustCompile(`(?m)^(?:require)?\s*` + regexp.QuoteMeta(c.module) + ` (v\S+)`).FindSubmatch(wrapper)
		if mod == nil {
			t.Errorf("testbed/tools/%s/go.mod does not require %s", c.dir, c.module)
			continue
		}
		if got, want := string(mod[1]), string(m[1]); got != want {
			t.Errorf("testbed/tools/%s/go.mod pins %s %s but testbed/tools/tools.sh caches it as %s", c.dir, c.module, got, want)
		}
		// The stack installs the same release on the clouds (components/queue for Kueue).
		if c.clouds != "" && c.clouds != string(m[1]) {
			t.Errorf("the stack installs %s %s on the clouds but the test bed runs %s", c.module, c.clouds, m[1])
		}
		for _, tool := range c.tools {
			if !regexp.MustCompile(`(?m)^(?:tool)?\s+` + regexp.QuoteMeta(tool) + `$`).Match(wrapper) {
				t.Errorf("testbed/tools/%s/go.mod has no `tool %s` directive: go mod tidy would drop the module", c.dir, tool)
			}
		}
	}
}
