package stacks

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/registry"
)

// Registry is a private registry every pod of the stack may pull from (kolotoc:registries[i]).
// Its password or token is kolotoc:registryPasswords[<server>], a secret.
type Registry struct {
	Server   string `json:"server"`   // host[:port][/path] as image names start with it: ghcr.io, europe-docker.pkg.dev, myacr.azurecr.io, docker.io
	Username string `json:"username"` // the registry's user name (a robot account, _json_key, a service principal's id, …)
}

var (
	// registryServer: a host name (optionally *.-wildcarded, as the kubelet allows) or an IPv4
	// address, an optional port and an optional path, lower case, no scheme. A host must have a
	// dot or a port (or be localhost): a first path element without either names a Docker Hub
	// account, not a registry.
	registryServer = regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?(/[a-z0-9._-]+)*$`)
)

// dockerHubAlias: Docker Hub's two names, each to the other.
var dockerHubAlias = map[string]string{"docker.io": "index.docker.io", "index.docker.io": "docker.io"}

// setRegistryPassword is how a user sets one registry's password, shown in the errors.
const setRegistryPassword = "pulumi config set --secret --path 'kolotoc:registryPasswords[\"%s\"]' <password or token>"

// decodeRegistryPasswords reads kolotoc:registryPasswords, a JSON object of registry server to
// password: set whole (`pulumi config set --secret kolotoc:registryPasswords '{"ghcr.io":"…"}'`)
// or one entry at a time with --path. Its value is never echoed, even when it is not JSON.
func decodeRegistryPasswords(c *Config, key, v string) []FieldError {
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil || m == nil {
		return []FieldError{{Key: key, Value: "[secret]", Msg: "not a JSON object of registry server to password or token; set each with `" +
			fmt.Sprintf(setRegistryPassword, "ghcr.io") + "`"}}
	}
	c.RegistryPasswords = make(map[string]Secret, len(m))
	for server, password := range m {
		c.RegistryPasswords[server] = NewSecret(password)
	}
	return nil
}

// validateRegistries checks the private registries, their passwords and the clouds' registry
// access: each server well-formed and named once, with a user name and a password; every password
// for a named server; cluster.acrId an ACR on azure, cluster.registryProjects GCP projects on gcp.
// Like the other cloud keys, those two are accepted on the simulated cloud, whose copy of a cloud
// stack runs unchanged.
func (c *Config) validateRegistries(v *Validator) {
	seen := map[string]bool{}
	for i, r := range c.Registries {
		key := fmt.Sprintf("registries[%d]", i)
		switch {
		case r.Server == "":
			v.add(key+".server", "(unset)", "required: the registry host images name, e.g. ghcr.io or europe-docker.pkg.dev")
		case strings.Contains(r.Server, "://"):
			v.add(key+".server", r.Server, "without a scheme; allowed: the host (and port or path) images name, e.g. "+
				strings.TrimSuffix(r.Server[strings.Index(r.Server, "://")+3:], "/"))
		case !registryServer.MatchString(r.Server) || !registryHost(r.Server):
			v.add(key+".server", r.Server, "not a registry host; allowed: a lower-case host with a dot (or a port, or localhost), "+
				"an optional :port and /path, as image names start with it: ghcr.io, europe-docker.pkg.dev, myacr.azurecr.io, registry.example.com:5000, docker.io")
		case seen[r.Server] || seen[dockerHubAlias[r.Server]]:
			v.add(key+".server", r.Server, "named twice (docker.io and index.docker.io are both Docker Hub); each registry once")
		default:
			seen[r.Server] = true
			if p, ok := c.RegistryPasswords[r.Server]; !ok || !p.IsSet() {
				v.add(fieldKey("registryPasswords", r.Server), "(unset)", "required for registries["+fmt.Sprint(i)+"]: run `"+
					fmt.Sprintf(setRegistryPassword, r.Server)+"`")
			}
		}
		if strings.TrimSpace(r.Username) == "" {
			v.add(key+".username", "(unset)", "required: the user the password or token belongs to (a robot account, _json_key for a GCP key file, a service principal's id)")
		} else if strings.ContainsAny(r.Username, ":\n") {
			v.add(key+".username", r.Username, "a user name cannot contain ':' or a line break (the registry's basic auth splits on the first ':')")
		}
	}
	for _, server := range meta.SortedKeys(c.RegistryPasswords) {
		if !seen[server] && !c.namesRegistry(server) {
			v.add(fieldKey("registryPasswords", server), "[secret]", "no registry of this server in kolotoc:registries; "+
				"add {server, username} there, or remove the password")
		}
	}
}

// namesRegistry reports whether a password's server is one a registries entry names but that
// entry was refused for another reason (reported there, not twice).
func (c *Config) namesRegistry(server string) bool {
	for _, r := range c.Registries {
		if r.Server == server {
			return true
		}
	}
	return false
}

// registryHost reports whether a well-formed server names a registry: its host has a dot or a
// port, or is localhost.
func registryHost(server string) bool {
	host, _, _ := strings.Cut(server, "/")
	return strings.ContainsAny(host, ".:") || host == "localhost"
}

// PullSecrets are the image pull Secrets every pod names: the registry credentials when the stack
// names registries, else none.
func PullSecrets(c *Config) []string {
	if len(c.Registries) == 0 {
		return nil
	}
	return []string{registry.SecretName}
}

// registryAuths are the validated registries with their passwords.
func registryAuths(c *Config) []registry.Auth {
	out := make([]registry.Auth, len(c.Registries))
	for i, r := range c.Registries {
		out[i] = registry.Auth{Server: r.Server, Username: r.Username, Password: c.RegistryPasswords[r.Server].Reveal()}
	}
	return out
}

// deployRegistries registers the pull Secret in the stack's namespace and, when the GPU agents
// run, in theirs (their images may be mirrored into a private registry too). It returns what the
// pods wait for: nothing without registries.
func deployRegistries(ctx *pulumi.Context, c *Config, namespace, agents pulumi.StringInput, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	if len(c.Registries) == 0 {
		return nil, nil
	}
	r, err := registry.New(ctx, "registry-credentials", &registry.Args{
		Namespace: namespace, AgentsNamespace: agents, DockerConfig: registry.DockerConfig(registryAuths(c)), Labels: stackLabels(c),
	}, opts...)
	if err != nil {
		return nil, err
	}
	// The Secrets themselves, not their component: the SDK adds a child to its component from
	// the child's registration goroutine, so a dependency on the component may miss them
	// (TestPullSecretOnEveryPod failed now and then).
	deps := make([]pulumi.Resource, 0, len(r.Secrets))
	for _, s := range r.Secrets {
		deps = append(deps, s)
	}
	return deps, nil
}
