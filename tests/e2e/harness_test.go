//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// repoRoot is the project directory (Pulumi.yaml), two levels up from tests/e2e.
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}()

// stack is one Pulumi stack of this program run by the real CLI in a private backend.
type stack struct {
	t          *testing.T
	name       string
	configFile string // Pulumi.<name>.yaml in the project directory (git-ignored, removed after)
	env        []string
	stateDir   string
	secrets    map[string]string // secret config values, to look for in state and outputs
	kube       *kubernetes.Clientset
	kubeconfig string
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// defaultCluster is the cluster testbed/cluster/cluster.sh starts when KOLOTOC_CLUSTER is unset:
// the one `make up` deploys to.
const defaultCluster = "kolotoc"

// clusterName is the local cluster the suite runs on (KOLOTOC_CLUSTER, which make e2e sets).
func clusterName() string {
	if c := os.Getenv("KOLOTOC_CLUSTER"); c != "" {
		return c
	}
	return defaultCluster
}

// clusterNetns is the network namespace the cluster lives in (testbed/cluster/cluster.sh).
func clusterNetns() string { return "/run/netns/kolotoc-" + clusterName() }

// localCluster is the local cluster's kubeconfig (KOLOTOC_KUBECONFIG, which make e2e sets) and
// its client configuration.
func localCluster(t *testing.T) (string, *rest.Config) {
	t.Helper()
	if c := clusterName(); c == defaultCluster {
		t.Fatalf("KOLOTOC_CLUSTER is %q, the cluster `make up` deploys the dev stack to, whose pods hold most of the real node's CPUs: run the suite with `make e2e` (it uses a cluster of its own)", c)
	}
	kubeconfig := os.Getenv("KOLOTOC_KUBECONFIG")
	if kubeconfig == "" {
		t.Fatal("KOLOTOC_KUBECONFIG is not set: run the suite with `make e2e` (it starts the local cluster)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig, cfg
}

// newStack creates stack `name` whose config is the committed Pulumi.<base>.yaml (or the stack
// file at path base, when it contains a slash) with overrides,
// pointed at the local cluster, with freshly generated secrets set through `pulumi config set
// --secret`. Cleanup destroys it and removes the stack.
func newStack(t *testing.T, name, base string, overrides map[string]any) *stack {
	t.Helper()
	kubeconfig, cfg := localCluster(t)
	if _, err := exec.LookPath("pulumi"); err != nil {
		t.Fatal("pulumi is not on PATH: run the suite with `make e2e` (it builds the tools)")
	}
	dir := t.TempDir()
	s := &stack{
		t: t, name: name, stateDir: filepath.Join(dir, "state"), kubeconfig: kubeconfig,
		configFile: filepath.Join(repoRoot, "Pulumi."+name+".yaml"),
		secrets: map[string]string{
			"kolotoc:jupyterPassword": randomHex(t, 16),
			"kolotoc:sshKeySeed":      randomHex(t, 32),
			"kolotoc:grafanaPassword": randomHex(t, 16),
		},
	}
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{s.stateDir, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The caller's PULUMI_* settings (make e2e exports the dev backend's) are replaced wholesale.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PULUMI_") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env,
		"PULUMI_BACKEND_URL=file://"+s.stateDir,
		"PULUMI_CONFIG_PASSPHRASE="+randomHex(t, 16),
		"PULUMI_HOME="+filepath.Join(dir, "home"),
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK=true",
		// The test bed's Go language host (v3.66) links the program anew at every command
		// (`go build`, 25-40 s on 2 cores); `go run` caches the executable, so each command after
		// the first of a build starts the program at once.
		"PULUMI_GO_USE_RUN=true",
		// The Kubernetes provider copies its kubeconfig into a new file of $TMPDIR at each start
		// and never removes it (pulumi-kubernetes' writeKubeconfigToFile): hundreds of copies of
		// the cluster's credentials in /tmp per suite. Here they go with the test's directory.
		"TMPDIR="+tmp,
	)
	// The Kubernetes provider goes into this PULUMI_HOME's plugin cache, not on PATH, where the
	// CLI would warn about it on every command (testbed/tools/tools.sh).
	if out, err := exec.Command(filepath.Join(repoRoot, "testbed", "tools", "tools.sh"), "--install-plugins", filepath.Join(dir, "home")).CombinedOutput(); err != nil {
		t.Fatalf("testbed/tools/tools.sh --install-plugins: %v\n%s", err, out)
	}
	var err error
	if s.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}

	if _, err := os.Stat(s.configFile); err == nil {
		t.Fatalf("%s exists already: another run of the suite, or a leftover to remove", s.configFile)
	}
	s.writeConfig(base, overrides)
	ownNamespace(t, "kolotoc-"+name) // the program's namespace for the stack
	t.Cleanup(s.cleanup)
	s.pulumi("stack", "init")
	for k, v := range s.secrets {
		s.pulumiStdin(v, "config", "set", "--secret", k)
	}
	return s
}

// writeConfig writes the stack's config file: the base stack's values, then overrides, then the
// local cluster's kubeconfig. Secure values are set afterwards by the CLI.
func (s *stack) writeConfig(base string, overrides map[string]any) {
	s.t.Helper()
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	b, err := os.ReadFile(stackFile(base))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		s.t.Fatal(err)
	}
	for k, v := range overrides {
		doc.Config["kolotoc:"+k] = v
	}
	cluster, _ := doc.Config["kolotoc:cluster"].(map[string]any)
	if cluster == nil {
		cluster = map[string]any{}
	}
	cluster["kubeconfig"] = s.kubeconfig
	doc.Config["kolotoc:cluster"] = cluster
	// Keep the salt and secure values the CLI wrote, if any.
	if old, err := os.ReadFile(s.configFile); err == nil {
		var prev map[string]any
		if yaml.Unmarshal(old, &prev) == nil {
			if salt, ok := prev["encryptionsalt"]; ok {
				defer func() { s.setTop("encryptionsalt", salt) }()
			}
			if pc, ok := prev["config"].(map[string]any); ok {
				for k, v := range pc {
					if m, ok := v.(map[string]any); ok && m["secure"] != nil {
						doc.Config[k] = v
					}
				}
			}
		}
	}
	out, err := yaml.Marshal(map[string]any{"config": doc.Config})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(s.configFile, out, 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) setTop(key string, v any) {
	b, err := os.ReadFile(s.configFile)
	if err != nil {
		s.t.Fatal(err)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		s.t.Fatal(err)
	}
	m[key] = v
	out, _ := yaml.Marshal(m)
	if err := os.WriteFile(s.configFile, out, 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// stackFile is the path of a base stack file: Pulumi.<base>.yaml at the root, or a path.
func stackFile(base string) string {
	if strings.Contains(base, "/") {
		return filepath.Join(repoRoot, base)
	}
	return filepath.Join(repoRoot, "Pulumi."+base+".yaml")
}

// sub returns the stack bound to a subtest, so that a failing command fails that subtest.
func (s *stack) sub(t *testing.T) *stack {
	c := *s
	c.t = t
	return &c
}

// reconfigure rewrites the stack's config from the base stack with new overrides.
func (s *stack) reconfigure(base string, overrides map[string]any) { s.writeConfig(base, overrides) }

type result struct {
	stdout, stderr string
	code           int
}

func (s *stack) run(stdin string, args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	args = append(args, "--stack", s.name, "--non-interactive")
	cmd := exec.CommandContext(ctx, "pulumi", args...)
	cmd.Dir = repoRoot
	cmd.Env = s.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		r.code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
	}
	s.t.Logf("pulumi %s: exit %d in %s", strings.Join(args[:min(len(args), 3)], " "), r.code, time.Since(start).Round(time.Second))
	s.assertNoSecrets("output of pulumi "+args[0], r.stdout+r.stderr)
	assertNoPluginWarnings(s.t, "pulumi "+args[0], r.stdout+r.stderr)
	return r
}

// pluginWarnings are what the CLI prints when a plugin comes from PATH ("using
// pulumi-resource-kubernetes from $PATH at …") or is older than the SDK the program links
// ("resource plugin kubernetes is expected to have version >=…"): on every command, to every
// user, unless the test bed installs the plugins as testbed/tools/tools.sh does.
var pluginWarnings = []string{"from $PATH at", "is expected to have version"}

func assertNoPluginWarnings(t *testing.T, what, output string) {
	t.Helper()
	for _, w := range pluginWarnings {
		for _, line := range strings.Split(output, "\n") {
			if strings.Contains(line, w) {
				t.Errorf("%s printed a plugin warning: %s", what, strings.TrimSpace(line))
				break
			}
		}
	}
}

// pulumi runs a command that must succeed.
func (s *stack) pulumi(args ...string) string {
	s.t.Helper()
	r := s.run("", args...)
	if r.code != 0 {
		s.t.Fatalf("pulumi %s failed (exit %d):\n%s\n%s", strings.Join(args, " "), r.code, tail(r.stdout), tail(r.stderr))
	}
	return r.stdout
}

func (s *stack) pulumiStdin(stdin string, args ...string) {
	s.t.Helper()
	if r := s.run(stdin, args...); r.code != 0 {
		s.t.Fatalf("pulumi %s failed: %s", args[0], tail(r.stderr))
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 60 {
		lines = append([]string{"…"}, lines[len(lines)-60:]...)
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// up runs `pulumi up` and returns the change summary.
func (s *stack) up() map[string]int {
	s.t.Helper()
	out := s.pulumi("up", "--yes", "--skip-preview", "--json")
	return changeSummary(s.t, out)
}

// preview runs `pulumi preview --json` and returns the steps by URN suffix (type::name) and op.
func (s *stack) preview() (map[string]string, map[string]int) {
	s.t.Helper()
	out := s.pulumi("preview", "--json")
	var p struct {
		Steps []struct {
			Op  string `json:"op"`
			URN string `json:"urn"`
		} `json:"steps"`
		ChangeSummary map[string]int `json:"changeSummary"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		s.t.Fatalf("preview --json: %v\n%s", err, tail(out))
	}
	steps := map[string]string{}
	for _, st := range p.Steps {
		if st.Op == "same" {
			continue
		}
		steps[urnKey(st.URN)] = st.Op
	}
	return steps, p.ChangeSummary
}

// urnKey shortens a URN to "<type>::<name>" (the type without its parent chain).
func urnKey(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return urn
	}
	types := strings.Split(parts[2], "$")
	return types[len(types)-1] + "::" + parts[3]
}

func changeSummary(t *testing.T, out string) map[string]int {
	t.Helper()
	// `pulumi up --json` streams engine events, one JSON object a line; the last summaryEvent
	// holds the resource changes.
	var summary map[string]int
	found := false
	for _, line := range strings.Split(out, "\n") {
		var ev struct {
			SummaryEvent *struct {
				ResourceChanges map[string]int `json:"resourceChanges"`
			} `json:"summaryEvent"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.SummaryEvent != nil {
			summary, found = ev.SummaryEvent.ResourceChanges, true
		}
	}
	if !found {
		t.Fatalf("no summary event in pulumi up --json:\n%s", tail(out))
	}
	if summary == nil {
		summary = map[string]int{}
	}
	return summary
}

// outputs returns `pulumi stack output --json` (secrets masked, as users see them).
func (s *stack) outputs() map[string]any {
	s.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s.pulumi("stack", "output", "--json")), &m); err != nil {
		s.t.Fatal(err)
	}
	return m
}

// assertNoSecrets fails if any secret config value, or an ssh private key, appears in text.
func (s *stack) assertNoSecrets(where, text string) {
	s.t.Helper()
	for k, v := range s.secrets {
		if strings.Contains(text, v) {
			s.t.Errorf("%s contains the plaintext value of %s", where, k)
		}
	}
	if strings.Contains(text, "OPENSSH PRIVATE KEY") {
		s.t.Errorf("%s contains an ssh private key", where)
	}
}

// stateFiles returns the contents of every file of the private backend (checkpoints, backups,
// history).
func (s *stack) stateFiles() map[string]string {
	s.t.Helper()
	files := map[string]string{}
	err := filepath.Walk(s.stateDir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return files
}

func (s *stack) cleanup() {
	if !s.exists() {
		_ = os.Remove(s.configFile)
		return
	}
	s.run("", "cancel", "--yes") // a lock left by a killed or timed-out run
	if r := s.run("", "destroy", "--yes", "--skip-preview"); r.code != 0 {
		s.t.Errorf("cleanup: pulumi destroy failed:\n%s", tail(r.stderr+r.stdout))
	}
	s.run("", "stack", "rm", "--yes", "--force")
	_ = os.Remove(s.configFile)
}

// exists reports whether the stack was created.
func (s *stack) exists() bool {
	return s.run("", "stack", "ls").code == 0 && s.run("", "stack", "select").code == 0
}

// selector of every object a stack labels.
func (s *stack) selector() string { return "app.kubernetes.io/instance=" + s.name }

// waitFor polls cond until it returns true or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
}

func listOpts(selector string) metav1.ListOptions { return metav1.ListOptions{LabelSelector: selector} }

func fmtMap(m map[string]string) string {
	b, _ := json.MarshalIndent(m, "", "  ")
	return fmt.Sprint(string(b))
}
