package stacks

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kolotoc/components/meta"
	"kolotoc/components/registry"
	"kolotoc/components/storage"
)

// What a training team does every day with an environment: runs (towers.run, onSuccess), a
// suspend switch for every GPU of the stack (kolotoc:suspend), code cloned into the workers
// (kolotoc:code) and environment variables on every workload (<workload>.env).

// Code is a git repository cloned into every pod of the training workloads (towers and
// launcher, carriers and sentinels, elastic workers, TF tasks) before they start
// (kolotoc:code).
type Code struct {
	// Repository is the clone URL: https://…, ssh://… or git@host:path (git://… and http://…
	// on cloud simulated, or with a full commit id as ref); required to clone anything.
	Repository string `json:"repository"`
	Ref        string `json:"ref"`   // branch, tag or commit checked out; default main
	Path       string `json:"path"`  // where the checkout is in every pod (also $KOLOTOC_CODE_DIR); default /code
	Image      string `json:"image"` // image that runs the clone (needs git and sh); default DefaultGitImage
	// CredentialsSecret: an existing Secret of the stack's namespace with keys username and
	// password (a token) for an https repository; default none (a public repository).
	CredentialsSecret string `json:"credentialsSecret"`
}

// allowedOnSuccess are the run policies of a workload's onSuccess (towers, elastic, tfcluster).
var allowedOnSuccess = []string{meta.OnSuccessKeep, meta.OnSuccessRelease}

const (
	// DefaultGitImage clones kolotoc:code (git 2.45.2 on Alpine; its entrypoint is replaced).
	DefaultGitImage = "alpine/git:2.45.2"
	// defaultCodeRef, defaultCodePath: the branch most repositories build from, and where the
	// checkout lands.
	defaultCodeRef  = "main"
	defaultCodePath = "/code"
)

// envName is what a variable may be called: a C identifier, as every shell and Python accept.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// applyRunDefaults fills the defaults of code and the run policies.
func (c *Config) applyRunDefaults() {
	if c.Code.Repository != "" {
		meta.Fill(&c.Code.Ref, defaultCodeRef)
		meta.Fill(&c.Code.Path, defaultCodePath)
		meta.Fill(&c.Code.Image, DefaultGitImage)
	}
	for _, wl := range entries() {
		if wl.OnSuccess != nil {
			meta.Fill(wl.OnSuccess(c), meta.OnSuccessKeep)
		}
	}
}

// validateRuns checks runs, code and every workload's env.
func (c *Config) validateRuns(v *Validator) {
	v.RunID("towers.run", c.Towers.Run)
	for _, wl := range entries() {
		if wl.OnSuccess != nil {
			v.oneOf(wl.Key+".onSuccess", *wl.OnSuccess(c), allowedOnSuccess)
		}
	}
	if c.TFCluster.Enabled && c.TFCluster.OnSuccess == meta.OnSuccessRelease && c.TFCluster.Chief.Count == 0 {
		v.add("tfcluster.onSuccess", meta.OnSuccessRelease, "the chief releases the cluster when its program succeeds; set tfcluster.chief.count 1")
	}

	if code := c.Code; code.Repository != "" || code.Ref != "" || code.Path != "" || code.Image != "" || code.CredentialsSecret != "" {
		switch {
		case code.Repository == "":
			v.add("code.repository", "(unset)", "required when any other code key is set: the URL git clones")
		case strings.HasPrefix(code.Repository, "-") || strings.ContainsAny(code.Repository, " \t\n"):
			v.add("code.repository", code.Repository, "not a clone URL; allowed: https://…, git://…, ssh-less URLs git accepts")
		case hasUserInfo(code.Repository):
			v.add("code.repository", "(a URL with credentials)", "credentials in the URL would sit in plain text in config and state; "+
				"put them in a Secret and name it in code.credentialsSecret")
		case hasQuery(code.Repository):
			v.add("code.repository", "(a URL with a query string)", "a query string (where tokens travel) would sit in plain text in config, "+
				"state and every clone's log; allowed: the URL without it, credentials in a Secret named in code.credentialsSecret")
		default:
			c.validateCodeTransport(v)
		}
		if strings.HasPrefix(code.Ref, "-") || strings.ContainsAny(code.Ref, " \t\n") {
			v.add("code.ref", code.Ref, "not a branch, tag or commit")
		}
		v.absPath("code.path", code.Path)
		for _, reserved := range []string{c.Storage.MountPath, c.Storage.Scratch.MountPath, "/etc/kolotoc"} {
			if code.Path != "" && reserved != "" && (code.Path == reserved || strings.HasPrefix(code.Path, reserved+"/") ||
				strings.HasPrefix(reserved, code.Path+"/")) {
				v.add("code.path", code.Path, fmt.Sprintf("overlaps %s, which Kolotoc mounts in the same pods", reserved))
			}
		}
		if path.Clean(code.Path) == "/" {
			v.add("code.path", code.Path, "the checkout cannot replace the root directory")
		}
		v.Image("code.image", code.Image)
		if code.CredentialsSecret != "" {
			v.dnsSubdomain("code.credentialsSecret", code.CredentialsSecret)
		}
	}

	own := OwnSecrets()
	for _, wl := range entries() {
		if wl.Env == nil {
			continue
		}
		for _, e := range wl.Env(c) {
			v.Env(e.Key, e.Env, own)
		}
	}
}

// OwnSecrets are the Secrets Kolotoc itself writes in the stack's namespace, by the names the
// components render them with: the towers' ssh key, Jupyter's token and certificate, Grafana's
// password, the registries' pull credentials and the shared store's mount credentials. A
// workload's env must not hand them out (every rank would see the towers' private key, say).
func OwnSecrets() []string {
	var out []string
	for _, wl := range entries() {
		out = append(out, wl.Secrets...)
	}
	return append(out, registry.SecretName, storage.CredentialsName(StorageName))
}

// hasUserInfo reports whether an http(s) URL carries a user (and perhaps a password or token),
// or a URL of another scheme a password (ssh://git@host/… names a user alone, as it should).
func hasUserInfo(repo string) bool {
	u, err := url.Parse(repo)
	if err != nil || u.User == nil {
		return false
	}
	_, password := u.User.Password()
	return u.Scheme == "http" || u.Scheme == "https" || password
}

// hasQuery reports whether a URL carries a query string.
func hasQuery(repo string) bool {
	u, err := url.Parse(repo)
	return err == nil && u.Scheme != "" && (u.RawQuery != "" || u.ForceQuery)
}

var (
	// scpLike is git's scp-like ssh syntax, user@host:path (git@github.com:team/train.git).
	scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]`)
	// fullCommit is a commit id in full (SHA-1, or SHA-256 in a repository of that format).
	fullCommit = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// codeScheme is how git reaches the repository: the URL's scheme, "ssh" for the scp-like
// syntax, "" for a local path.
func codeScheme(repo string) string {
	if scpLike.MatchString(repo) {
		return "ssh"
	}
	if u, err := url.Parse(repo); err == nil && strings.Contains(repo, "://") {
		return u.Scheme
	}
	return ""
}

// validateCodeTransport refuses, on a real cluster (every cloud but simulated), code fetched over
// a transport that authenticates no server (git://, http://, a path of the node) unless
// code.ref pins it to a commit: anyone on the path could swap the code every rank runs. The
// credentials of code.credentialsSecret go to https only (git sends them in the clear on http).
func (c *Config) validateCodeTransport(v *Validator) {
	code := c.Code
	scheme := codeScheme(code.Repository)
	if code.CredentialsSecret != "" && scheme != "https" {
		v.add("code.credentialsSecret", code.CredentialsSecret, "a username and password are given to git over https only; allowed with "+
			"code.repository "+code.Repository+": none (ssh authenticates with a key, git:// and http:// would send them in the clear)")
	}
	if c.CloudEntry().Local || scheme == "https" || scheme == "ssh" || fullCommit.MatchString(code.Ref) {
		return
	}
	v.add("code.repository", code.Repository, fmt.Sprintf("on cloud %s the clone must authenticate its server: over git://, http:// "+
		"or a path anyone on the way could swap the code every rank runs; allowed: https://…, ssh://… or git@host:path, "+
		"or pin code.ref to a full commit id (40 hex digits)", c.Cloud))
}

// RunID checks a run id: a label value, since it labels the run's pods.
func (v *Validator) RunID(key, id string) {
	if id == "" {
		return
	}
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
		v.add(key, id, "not a run id: up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
	}
}

func (v *Validator) dnsSubdomain(key, name string) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		v.add(key, name, "not a Kubernetes object name: "+strings.Join(errs, "; "))
	}
}

// Env checks a workload's variables: names that shells accept, not Kolotoc's own (KOLOTOC_*),
// each once, and each a value or a key of a Secret that is not Kolotoc's own (own), not both.
func (v *Validator) Env(key string, env []meta.EnvSetting, own []string) {
	seen := map[string]bool{}
	for i, e := range env {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case !envName.MatchString(e.Name):
			v.add(k+".name", e.Name, "not a variable name; allowed: letters, digits and '_', not starting with a digit")
		case strings.HasPrefix(e.Name, "KOLOTOC_"):
			v.add(k+".name", e.Name, "KOLOTOC_* variables are Kolotoc's own; choose another name")
		case seen[e.Name]:
			v.add(k+".name", e.Name, "set twice in "+key)
		}
		seen[e.Name] = true
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			v.add(k, e.Name, "has both value and valueFrom; give one")
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil {
			v.add(k+".valueFrom", "(set)", "needs secretKeyRef: {name, key} of a Secret in the stack's namespace")
			continue
		}
		v.dnsSubdomain(k+".valueFrom.secretKeyRef.name", ref.Name)
		if slices.Contains(own, ref.Name) {
			v.add(k+".valueFrom.secretKeyRef.name", ref.Name, "a Secret Kolotoc itself writes (its keys, passwords and credentials); "+
				"allowed: a Secret of your own, not "+strings.Join(own, ", "))
		}
		if errs := validation.IsConfigMapKey(ref.Key); len(errs) > 0 {
			v.add(k+".valueFrom.secretKeyRef.key", ref.Key, "not a Secret key: "+strings.Join(errs, "; "))
		}
	}
}

// CodeArgs is kolotoc:code as the components take it; nil when no repository is set.
func CodeArgs(c *Config) *meta.Code {
	if c.Code.Repository == "" {
		return nil
	}
	k := c.Code
	return &meta.Code{Repository: k.Repository, Ref: k.Ref, Path: k.Path, Image: k.Image, CredentialsSecret: k.CredentialsSecret}
}
