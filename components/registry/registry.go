// Package registry renders a stack's image pull credentials: one kubernetes.io/dockerconfigjson
// Secret in each namespace that runs Kolotoc pods, which every pod names in imagePullSecrets
// (meta.Labels.PullSecrets), so that images from private registries pull wherever Kolotoc runs them.
package registry

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// SecretName is the pull Secret in every namespace with Kolotoc pods.
	SecretName = "registry-credentials"
	// SecretType is the type the kubelet reads pull credentials from.
	SecretType = "kubernetes.io/dockerconfigjson"
	// DataKey is the key of the Docker config in such a Secret.
	DataKey = ".dockerconfigjson"
	// component labels the Secrets.
	component = "registry"
)

// dockerHub is how `docker login` names Docker Hub in a Docker config. The kubelet reads that key as
// index.docker.io, under which it looks up every image without a registry host (horovod/horovod);
// a key "docker.io" would match none of them.
const dockerHub = "https://index.docker.io/v1/"

// Auth is one registry's credentials.
type Auth struct {
	Server   string // registry host[:port][/path] as images name it, e.g. ghcr.io, europe-docker.pkg.dev
	Username string
	Password string // a password or token: secret
}

// DockerConfig is the Docker config JSON of the credentials, a secret output: the passwords never
// leave it in plain text. Its bytes are the same on every run (keys sorted), so previews stay quiet.
func DockerConfig(auths []Auth) pulumi.StringOutput {
	return pulumi.ToSecret(pulumi.String(configJSON(auths))).(pulumi.StringOutput)
}

// configJSON is the Docker config's text, for DockerConfig alone (it holds the passwords).
func configJSON(auths []Auth) string {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	cfg := struct {
		Auths map[string]entry `json:"auths"`
	}{Auths: map[string]entry{}}
	for _, a := range auths {
		server := a.Server
		if server == "docker.io" || server == "index.docker.io" {
			server = dockerHub
		}
		cfg.Auths[server] = entry{Username: a.Username, Password: a.Password,
			Auth: base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))}
	}
	b, _ := json.Marshal(cfg) // strings and maps only: cannot fail
	return string(b)
}

// Args are the pull Secrets' inputs.
type Args struct {
	// Namespace is the stack's namespace; AgentsNamespace the GPU agents' (nil when none runs).
	Namespace       pulumi.StringInput
	AgentsNamespace pulumi.StringInput
	// DockerConfig is the Docker config JSON (DockerConfig): a secret output.
	DockerConfig pulumi.StringInput
	Labels       meta.Labels
}

// Credentials is the pull Secret of each namespace.
type Credentials struct {
	pulumi.ResourceState
	Secrets []*corev1.Secret
}

// New registers the pull Secret in the stack's namespace (<name>) and in the GPU agents' one
// (<name>-gpu-agents).
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Credentials, error) {
	if args == nil || args.DockerConfig == nil || args.Namespace == nil {
		return nil, errors.New("registry: a Docker config and a namespace are required")
	}
	c := &Credentials{}
	if err := ctx.RegisterComponentResource("kolotoc:registry:Credentials", name, c, opts...); err != nil {
		return nil, fmt.Errorf("registry %q: %w", name, err)
	}
	namespaces := map[string]pulumi.StringInput{name: args.Namespace}
	if args.AgentsNamespace != nil {
		namespaces[name+"-gpu-agents"] = args.AgentsNamespace
	}
	for _, child := range meta.SortedKeys(namespaces) {
		s, err := corev1.NewSecret(ctx, child, RenderSecret(namespaces[child], args.DockerConfig, args.Labels), pulumi.Parent(c))
		if err != nil {
			return nil, fmt.Errorf("registry %q: Secret %q: %w", name, child, err)
		}
		c.Secrets = append(c.Secrets, s)
	}
	return c, meta.RegisterOutputs(ctx, c, pulumi.Map{})
}

// RenderSecret builds the pull Secret of one namespace. Its data is secret in the inputs, in the
// state and in every output; pods name it, so a new password reaches the next pull without
// restarting anything.
func RenderSecret(namespace, dockerConfig pulumi.StringInput, labels meta.Labels) *corev1.SecretArgs {
	return &corev1.SecretArgs{
		Metadata: labels.ObjectMeta(SecretName, namespace, component),
		Type:     pulumi.String(SecretType),
		StringData: pulumi.ToSecret(pulumi.StringMap{
			DataKey: dockerConfig,
		}).(pulumi.StringMapOutput),
	}
}
