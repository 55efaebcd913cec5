package stacks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"gopkg.in/yaml.v3"

	"kolotoc/components/entrypoint"
)

// Stack outputs that say how a user's kubectl reaches the stack's cluster.
const (
	KubeContextOutput       = "kubeContext"       // the kube context every printed kubectl command names
	KubeconfigCommandOutput = "kubeconfigCommand" // fetches (clouds) or selects (existing, simulated) the kubeconfig holding it
)

// KubeAccess is how a user's kubectl reaches the stack's cluster: the kube context, the command
// that puts it in the user's kubeconfig, and the kubectl every printed command starts with. Bound
// to the context, a printed command never acts on whatever cluster the user's kubectl happens to
// point at.
type KubeAccess struct {
	// Context is the kube context of the stack's cluster: gcloud's gke_<project>_<location>_<name>
	// on gcp, cluster.context or cluster.name on aws and azure (the alias the fetch command
	// gives it), and on existing and simulated cluster.context or the kubeconfig's
	// current-context, which the Kubernetes provider uses too. "" when none is named.
	Context pulumi.StringOutput
	// KubeconfigCommand fetches the cluster's credentials into the user's kubeconfig (gcloud,
	// aws, az), or on existing and simulated points KUBECONFIG at the configured file.
	KubeconfigCommand pulumi.StringOutput
	// kubeconfig is the absolute path printed kubectl commands name with --kubeconfig on existing
	// and simulated, where the context lives in that file rather than in the user's own; "" on
	// clouds.
	kubeconfig string
}

// Kubectl is a kubectl command bound to the stack's cluster:
// `kubectl [--kubeconfig <path>] --context <context> <args>`.
func (k KubeAccess) Kubectl(args string) pulumi.StringOutput {
	path := k.kubeconfig
	return k.Context.ApplyT(func(context string) string {
		cmd := "kubectl"
		if path != "" {
			cmd += " --kubeconfig " + shellQuote(path)
		}
		if context != "" {
			cmd += " --context " + shellQuote(context)
		}
		return cmd + " " + args
	}).(pulumi.StringOutput)
}

// Kubectlf is Kubectl with its arguments formatted.
func (k KubeAccess) Kubectlf(format string, a ...any) pulumi.StringOutput {
	return k.Kubectl(fmt.Sprintf(format, a...))
}

// outputs are the kubeContext and kubeconfigCommand outputs.
func (k KubeAccess) outputs() pulumi.Map {
	return pulumi.Map{KubeContextOutput: k.Context, KubeconfigCommandOutput: k.KubeconfigCommand}
}

// LocalKubeAccess is the access to the simulated cloud's local cluster or an existing cluster:
// the configured kubeconfig (made absolute: Pulumi runs the program in the project directory,
// a user's shell may be anywhere) and cluster.context, or that file's current-context.
func LocalKubeAccess(c *Config) (KubeAccess, error) {
	k := c.Cluster
	path, err := filepath.Abs(k.Kubeconfig)
	if err != nil {
		return KubeAccess{}, fmt.Errorf("%s:cluster.kubeconfig = %s: %w", ConfigNamespace, k.Kubeconfig, err)
	}
	context := k.Context
	if context == "" {
		b, err := os.ReadFile(k.Kubeconfig)
		if err != nil {
			return KubeAccess{}, fmt.Errorf("%s:cluster.kubeconfig = %s: %w", ConfigNamespace, k.Kubeconfig, err)
		}
		var doc struct {
			CurrentContext string `yaml:"current-context"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return KubeAccess{}, fmt.Errorf("%s:cluster.kubeconfig = %s: not a kubeconfig: %w", ConfigNamespace, k.Kubeconfig, err)
		}
		context = doc.CurrentContext
	}
	return KubeAccess{
		Context:           pulumi.String(context).ToStringOutput(),
		KubeconfigCommand: pulumi.String("export KUBECONFIG=" + shellQuote(path)).ToStringOutput(),
		kubeconfig:        path,
	}, nil
}

// stackKubeAccess is the access to the stack's cluster: the cloud's, or the configured kubeconfig's.
func stackKubeAccess(c *Config, cloud *CloudResult) (KubeAccess, error) {
	if cloud != nil {
		return cloud.Kube, nil
	}
	return LocalKubeAccess(c)
}

// publicOutputs are the LoadBalancer's address and Jupyter's public URL once the cloud has given
// it one (the provider waits for the address before it reports the Service created).
func publicOutputs(e *entrypoint.Entrypoint, a *entrypoint.Args) pulumi.Map {
	if e == nil || e.PublicService == nil {
		return nil
	}
	addr := entrypoint.PublicAddress(e.PublicService)
	path := entrypoint.JupyterPath(a)
	return pulumi.Map{
		"jupyterPublicAddress": addr,
		"jupyterPublicUrl": addr.ApplyT(func(host string) string {
			if host == "" {
				return ""
			}
			if strings.Contains(host, ":") { // IPv6
				host = "[" + host + "]"
			}
			return "https://" + host + path
		}).(pulumi.StringOutput),
	}
}

// ShellQuote quotes s for bash when it holds anything but the characters of paths and names (the
// clouds' kubeconfig commands).
func ShellQuote(s string) string { return shellQuote(s) }

// shellQuote quotes s for bash when it holds anything but the characters of paths and names.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
