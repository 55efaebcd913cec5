package hack

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kolotoc/components/queue"
)

// TestGoBinName: hack/tools.sh builds several packages with one `go build -o DIR/` and must find
// each binary under the name go gives it. A package path ending in a major-version suffix is
// named after the element before it: the cold build of etcd (go.etcd.io/etcd/server/v3, binary
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
		"kolotoc.dev/hack/tools/coredns":             "coredns",
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

// TestKubernetesSDKMatchesProvider: the CLI warns ("resource plugin kubernetes is expected to
// have version >=X") when the Kubernetes SDK the program links is newer than the provider plugin
// it runs. The plugin hack/tools.sh builds is release KUBERNETES_PROVIDER_VERSION; the product's
// go.mod must pin github.com/pulumi/pulumi-kubernetes/sdk/v4 at that same release, and the
// wrapper module must pin the provider's module at the pseudo-version of that release's commit.
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

	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	sdk := regexp.MustCompile(`(?m)^\s*github\.com/pulumi/pulumi-kubernetes/sdk/v4 (v\S+)`).FindSubmatch(gomod)
	if sdk == nil {
		t.Fatal("go.mod does not require github.com/pulumi/pulumi-kubernetes/sdk/v4")
	}
	if got := string(sdk[1]); got != release {
		t.Errorf("go.mod pins the Kubernetes SDK at %s but hack/tools.sh builds provider %s: every pulumi command would warn that the plugin is too old", got, release)
	}

	// The commit each served provider release was cut from (git describe in pulumi-kubernetes):
	// the module proxy serves the provider module only by pseudo-version.
	commits := map[string]string{"v4.25.0": "v4.0.0-20260115033456-f47bc2d6f199"}
	wrapper, err := os.ReadFile("tools/kubernetes/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	prov := regexp.MustCompile(`(?m)^(?:require)?\s*github\.com/pulumi/pulumi-kubernetes/provider/v4 (v\S+)`).FindSubmatch(wrapper)
	if prov == nil {
		t.Fatal("hack/tools/kubernetes/go.mod does not require the provider module")
	}
	if want, ok := commits[release]; !ok {
		t.Errorf("no known commit for provider release %s: add it to this test after checking `git describe` upstream", release)
	} else if got := string(prov[1]); got != want {
		t.Errorf("hack/tools/kubernetes/go.mod pins the provider at %s, which is not release %s (%s)", got, release, want)
	}
}

// TestE2ERunsOnAClusterOfItsOwn: `make up` leaves the dev stack running on the default local
// cluster, where it holds most of the real node's two CPUs; `make test` after it (the README's
// order) timed out with the suite's pods "Insufficient cpu". The suite runs on a cluster of its
// own: every command of `make e2e` and `make test` that starts, names or uses a cluster must say
// which, and not the default one.
func TestE2ERunsOnAClusterOfItsOwn(t *testing.T) {
	// make -n prints e2e's commands without running them. (Not `make -n test`: make runs a
	// recipe line holding $(MAKE) even under -n, and test's starts a cluster.)
	out, err := exec.Command("make", "-C", "..", "-n", "--no-print-directory", "e2e").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n e2e: %v\n%s", err, out)
	}
	uses := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "hack/cluster.sh") && !strings.Contains(line, "go test -tags e2e") {
			continue
		}
		uses++
		if c := clusterOf(line); c == "" || c == "kolotoc" {
			t.Errorf("make e2e runs %q on the default cluster, the one make up deploys to", line)
		}
	}
	if uses == 0 {
		t.Errorf("make -n e2e starts no cluster and runs no e2e suite:\n%s", out)
	}
	// make test wraps make e2e in `hack/cluster.sh with`, which must put back the same cluster.
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	with := regexp.MustCompile(`(?m)^\t(.*)hack/cluster\.sh with .*\be2e$`).FindSubmatch(makefile)
	if with == nil {
		t.Fatal("make test does not run make e2e under hack/cluster.sh with")
	}
	if !strings.Contains(string(with[1]), "$(E2E_CLUSTER)") {
		t.Errorf("make test runs `hack/cluster.sh with` without $(E2E_CLUSTER): it would start, and then put back, the default cluster")
	}
}

// clusterOf is the KOLOTOC_CLUSTER a shell line sets, or "".
func clusterOf(line string) string {
	if m := regexp.MustCompile(`KOLOTOC_CLUSTER=(\S+)`).FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// TestScriptsUseTheClustersKubeconfig: every script that talks to the local cluster takes its
// kubeconfig from KOLOTOC_KUBECONFIG, defaulting to .kolotoc/kubeconfig. hack/node.sh read the
// default cluster's file directly: beside a running default cluster it checked that cluster's
// node and passed by accident; in a fresh clone (CI) make test's cluster never came up ("timed out
// waiting for node kolotoc-node to be Ready").
func TestScriptsUseTheClustersKubeconfig(t *testing.T) {
	scripts, err := filepath.Glob("*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	fixed := regexp.MustCompile(`\.kolotoc/kubeconfig\b`)
	allowed := regexp.MustCompile(`\$\{KOLOTOC_KUBECONFIG:-[^}]*\.kolotoc/kubeconfig\}`)
	for _, name := range scripts {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if fixed.MatchString(allowed.ReplaceAllString(line, "")) {
				t.Errorf("%s:%d names the default cluster's kubeconfig, not ${KOLOTOC_KUBECONFIG:-…}: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestKueueVersionMatchesModule: hack/tools.sh keys Kueue's cache directory by KUEUE_VERSION,
// but what it builds is the version hack/tools/kueue/go.mod requires (and hack/cluster.sh takes
// the CRDs and webhooks from that module). Were they to differ, a cached binary of one version
// would run against the manifests of another.
func TestKueueVersionMatchesModule(t *testing.T) {
	script, err := os.ReadFile("tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUEUE_VERSION=(v\S+)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("tools.sh sets no KUEUE_VERSION")
	}
	wrapper, err := os.ReadFile("tools/kueue/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^(?:require)?\s*sigs\.k8s\.io/kueue (v\S+)`).FindSubmatch(wrapper)
	if mod == nil {
		t.Fatal("hack/tools/kueue/go.mod does not require sigs.k8s.io/kueue")
	}
	if got, want := string(mod[1]), string(m[1]); got != want {
		t.Errorf("hack/tools/kueue/go.mod pins sigs.k8s.io/kueue %s but hack/tools.sh caches it as %s", got, want)
	}
	// The stack installs the same release on the clouds (components/queue).
	if queue.KueueVersion != string(m[1]) {
		t.Errorf("components/queue installs Kueue %s on the clouds but the test bed runs %s", queue.KueueVersion, m[1])
	}
	if !regexp.MustCompile(`(?m)^tool sigs\.k8s\.io/kueue/cmd/kueue$`).Match(wrapper) {
		t.Error("hack/tools/kueue/go.mod has no `tool sigs.k8s.io/kueue/cmd/kueue` directive: go mod tidy would drop the module")
	}
}
