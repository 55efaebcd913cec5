package hack

import (
	"os"
	"os/exec"
	"strings"
	"testing"
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
