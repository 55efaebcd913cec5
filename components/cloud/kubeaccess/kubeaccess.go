// Package kubeaccess holds what the clouds (the simulated one included) share about reaching and
// shaping their clusters' nodes: the kubeconfig whose credentials come from the cloud's CLI (no
// token is ever stored in it), the node taint, and the taint effects in the clouds' APIs'
// spelling. It imports no cloud SDK, so it costs their packages nothing to share it.
package kubeaccess

import (
	"fmt"
	"strings"
)

// ExecKubeconfig is a kubeconfig for one cluster, context and user all named name, at server with
// the CA caData, whose user runs an exec credential plugin: exec holds the plugin's fields after
// its apiVersion (command, args or hints), one YAML line each, without indentation.
func ExecKubeconfig(name, server, caData string, exec ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s
current-context: %[1]s
users:
- name: %[1]s
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
`, name, server, caData)
	for _, l := range exec {
		b.WriteString("      " + l + "\n")
	}
	b.WriteString("      interactiveMode: IfAvailable\n")
	return b.String()
}

// Taint is a node taint with its Kubernetes effect (NoSchedule, PreferNoSchedule, NoExecute).
type Taint struct{ Key, Value, Effect string }

// String is the taint in kubectl's notation, key=value:Effect (as AKS's node taints take it).
func (t Taint) String() string { return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect) }

// TaintEffect is a Kubernetes taint effect as GKE and EKS spell it in their node pool APIs.
func TaintEffect(effect string) string {
	switch effect {
	case "PreferNoSchedule":
		return "PREFER_NO_SCHEDULE"
	case "NoExecute":
		return "NO_EXECUTE"
	}
	return "NO_SCHEDULE"
}

// UniqueSuffixLen is the length of the suffix Terraform-based providers append to a name prefix
// (a timestamp and a counter: terraform-plugin-sdk's id.PrefixedUniqueId), which is how the
// GKE and EKS providers make a node pool's name when given namePrefix.
const UniqueSuffixLen = 26

// NamePrefix is a pool's name prefix for a cloud whose pool names are at most max characters
// once the provider's unique suffix is appended: the pool's name, cut to fit and ended by '-'.
// Two pools may share a prefix; the suffix keeps their names apart.
func NamePrefix(pool string, max int) string {
	room := max - UniqueSuffixLen - 1
	if len(pool) > room {
		pool = strings.TrimRight(pool[:room], "-_")
	}
	return pool + "-"
}
