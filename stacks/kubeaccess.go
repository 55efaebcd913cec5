package stacks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"gopkg.in/yaml.v3"

	"kolotoc/components/entrypoint"
	"kolotoc/components/meta"
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

// cloudKubeAccess is the access to a cluster Kolotoc created: its cloud's CLI fetches the
// credentials into the user's kubeconfig under a context the printed commands name. gkeProject
// is the GKE cluster's project (cluster.project, or the provider's default as GKE reports it).
func cloudKubeAccess(c *Config, gkeProject pulumi.StringOutput) KubeAccess {
	k := c.Cluster
	alias := k.Context
	meta.Fill(&alias, k.Name)
	switch c.Cloud {
	case CloudGCP:
		if k.Project != "" {
			gkeProject = pulumi.String(k.Project).ToStringOutput() // known at preview
		}
		flag, location := "--region", k.Region
		if k.Zone != "" {
			flag, location = "--zone", k.Zone
		}
		// gcloud names the context itself; its project is GKE's, known once the cluster exists
		// when cluster.project is unset.
		return KubeAccess{
			Context: pulumi.Sprintf("gke_%s_%s_%s", gkeProject, location, k.Name),
			KubeconfigCommand: pulumi.Sprintf("gcloud container clusters get-credentials %s %s %s --project %s",
				k.Name, flag, location, gkeProject),
		}
	case CloudAWS:
		return KubeAccess{
			Context: pulumi.String(alias).ToStringOutput(),
			KubeconfigCommand: pulumi.String(fmt.Sprintf("aws eks update-kubeconfig --name %s --region %s --alias %s",
				k.Name, k.Region, shellQuote(alias))).ToStringOutput(),
		}
	default: // azure
		return KubeAccess{
			Context: pulumi.String(alias).ToStringOutput(),
			KubeconfigCommand: pulumi.String(fmt.Sprintf("az aks get-credentials --resource-group %s --name %s --context %s",
				azureResourceGroup(k), k.Name, shellQuote(alias))).ToStringOutput(),
		}
	}
}

// azureResourceGroup is the resource group Kolotoc creates for an AKS cluster.
func azureResourceGroup(k Cluster) string { return k.Name + "-rg" }

// stackKubeAccess is the access to the stack's cluster: the cloud's, or the configured kubeconfig's.
func stackKubeAccess(c *Config, cloud *cloudResult) (KubeAccess, error) {
	if cloud != nil {
		return cloud.kube, nil
	}
	return LocalKubeAccess(c)
}

// validateKubeAccess: on gcp the context's name is gcloud's to choose.
func (c *Config) validateKubeAccess(v *Validator) {
	if c.Cloud == CloudGCP && c.Cluster.Context != "" {
		v.add("cluster.context", c.Cluster.Context, "gcloud names a GKE cluster's context gke_<project>_<location>_<name> (the kubeContext output); "+
			"remove it on gcp (on aws and azure it names the context the kubeconfigCommand output creates)")
	}
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
