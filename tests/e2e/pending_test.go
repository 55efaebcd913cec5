//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// pendingProject is the program of TestPendingCreates (testdata/pending): a fixed-name and a
// generated-name object, created the way a cloud API creates (a second create of an existing
// object fails).
var pendingProject = filepath.Join(repoRoot, "tests", "e2e", "testdata", "pending")

// pendingStack is one stack of the pending program in a private backend.
type pendingStack struct {
	t    *testing.T
	name string
	env  []string
}

func (s *pendingStack) run(args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "pulumi", append(args, "--stack", s.name, "--non-interactive")...)
	cmd.Dir, cmd.Env = pendingProject, s.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		r.code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
	}
	s.t.Logf("pulumi %s: exit %d", strings.Join(args[:min(len(args), 2)], " "), r.code)
	return r
}

func (s *pendingStack) must(args ...string) string {
	s.t.Helper()
	r := s.run(args...)
	if r.code != 0 {
		s.t.Fatalf("pulumi %s exited %d:\n%s\n%s", strings.Join(args, " "), r.code, tail(r.stdout), tail(r.stderr))
	}
	return r.stdout
}

// deployment is the stack's exported state.
func (s *pendingStack) deployment() map[string]any {
	s.t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(s.must("stack", "export")), &d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

func pendingOps(d map[string]any) []any {
	ops, _ := d["deployment"].(map[string]any)["pending_operations"].([]any)
	return ops
}

// newPendingStack makes a stack of the pending program whose state holds the Kubernetes provider
// and two pending creates (the fixed and the generated object), and creates on the cluster what
// those creates made before the update was cut off: the state an `up` killed while the cloud was
// creating leaves. It returns the stack and the two creates' URNs.
func newPendingStack(t *testing.T, kube *kubernetes.Clientset, kubeconfig, ns, name string) (*pendingStack, string, string) {
	t.Helper()
	dir := t.TempDir()
	s := &pendingStack{t: t, name: name}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PULUMI_") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "PULUMI_BACKEND_URL=file://"+dir, "PULUMI_CONFIG_PASSPHRASE="+randomHex(t, 16),
		"PULUMI_HOME="+filepath.Join(dir, "home"), "PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true", "PULUMI_GO_USE_RUN=true")
	if out, err := exec.Command(filepath.Join(repoRoot, "testbed", "tools", "tools.sh"), "--install-plugins", filepath.Join(dir, "home")).CombinedOutput(); err != nil {
		t.Fatalf("testbed/tools/tools.sh --install-plugins: %v\n%s", err, out)
	}
	configFile := filepath.Join(pendingProject, "Pulumi."+name+".yaml")
	t.Cleanup(func() { os.Remove(configFile) })
	s.must("stack", "init")
	s.must("config", "set", "pending:kubeconfig", kubeconfig)
	s.must("config", "set", "pending:namespace", ns)
	s.must("config", "set", "pending:declare", "false")
	s.must("up", "--yes", "--skip-preview") // the provider alone

	d := s.deployment()
	var provider string
	for _, r := range d["deployment"].(map[string]any)["resources"].([]any) {
		r := r.(map[string]any)
		if r["type"] == "pulumi:providers:kubernetes" {
			provider = r["urn"].(string) + "::" + r["id"].(string)
		}
	}
	if provider == "" {
		t.Fatal("no Kubernetes provider in the state")
	}
	urn := func(n string) string { return "urn:pulumi:" + name + "::pending::kubernetes:core/v1:ConfigMap::" + n }
	var ops []any
	for _, n := range []string{"fixed", "generated"} {
		ops = append(ops, map[string]any{"type": "creating", "resource": map[string]any{
			"urn": urn(n), "custom": true, "type": "kubernetes:core/v1:ConfigMap", "provider": provider,
			"inputs": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"checkpoint": "step-1"}},
		}})
	}
	// `pulumi stack import` drops pending operations (it says so), so they are written into the
	// file backend's checkpoint, where the engine writes them.
	checkpoint := filepath.Join(dir, ".pulumi", "stacks", "pending", name+".json")
	b, err := os.ReadFile(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	var cp map[string]any
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	cp["checkpoint"].(map[string]any)["latest"].(map[string]any)["pending_operations"] = ops
	if b, err = json.Marshal(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(checkpoint, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := len(pendingOps(s.deployment())); n != 2 {
		t.Fatalf("%d pending operations in the state, want the 2 written", n)
	}

	// What the creates did before the update was killed: the objects exist, the generated one
	// under the name the provider gave it (and its mark of a generated name).
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns}},
		{ObjectMeta: metav1.ObjectMeta{Name: "generated-1a2b3c4d", Namespace: ns, Annotations: map[string]string{"pulumi.com/autonamed": "true"}}},
	} {
		cm.Data = map[string]string{"checkpoint": "step-1"}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.must("config", "set", "pending:declare", "true")
	return s, urn("fixed"), urn("generated")
}

// TestPendingCreates: what the next `pulumi up` does with creates an interrupted update left
// pending, and the recovery docs/recovery.md gives, run by the real CLI and Kubernetes provider.
// The objects stand in for cloud resources: a fixed name (a Filestore instance, a pinned pool)
// and a generated one (a pool's generated name).
func TestPendingCreates(t *testing.T) {
	kubeconfig, cfg := localCluster(t)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("pulumi"); err != nil {
		t.Fatal("pulumi is not on PATH: run the suite with `make e2e` (it builds the tools)")
	}
	ctx := context.Background()
	namespace := func(t *testing.T) string {
		ns := "pending-" + randomHex(t, 4)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
		return ns
	}
	names := func(t *testing.T, ns string) []string {
		list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				out = append(out, cm.Name)
			}
		}
		return out
	}

	t.Run("the next up warns, fails on the fixed name and leaves a second generated one", func(t *testing.T) {
		ns := namespace(t)
		s, _, _ := newPendingStack(t, kube, kubeconfig, ns, "upfirst-"+randomHex(t, 3))
		r := s.run("up", "--yes", "--skip-preview")
		out := r.stdout + r.stderr
		if r.code == 0 {
			t.Errorf("up succeeded; want it to fail on the fixed name that exists:\n%s", tail(out))
		}
		if !strings.Contains(out, "pending operations from previous deployment") {
			t.Errorf("up did not warn about the pending creates:\n%s", tail(out))
		}
		if !strings.Contains(out, "already exists") {
			t.Errorf("the fixed name's second create did not fail with \"already exists\":\n%s", tail(out))
		}
		generated := 0
		for _, n := range names(t, ns) {
			if strings.HasPrefix(n, "generated-") {
				generated++
			}
		}
		if generated != 2 {
			t.Errorf("objects %v: want the interrupted generated one left beside a second one (2 generated-*), %d", names(t, ns), generated)
		}
		if ops := pendingOps(s.deployment()); len(ops) != 2 {
			t.Errorf("%d pending operations after the up, want both carried over until a refresh resolves them", len(ops))
		}
	})

	t.Run("cleared and imported first, the up adopts both and duplicates nothing", func(t *testing.T) {
		// docs/recovery.md: forget the pending creates, import what the cloud made under the
		// program's URNs (its provider given), then up.
		ns := namespace(t)
		s, _, _ := newPendingStack(t, kube, kubeconfig, ns, "import-"+randomHex(t, 3))
		s.must("refresh", "--yes", "--clear-pending-creates")
		provider := "k8s=urn:pulumi:" + s.name + "::pending::pulumi:providers:kubernetes::k8s"
		for name, id := range map[string]string{"fixed": ns + "/fixed", "generated": ns + "/generated-1a2b3c4d"} {
			s.must("import", "kubernetes:core/v1:ConfigMap", name, id, "--provider", provider, "--protect=false", "--generate-code=false", "--yes")
		}
		if ops := pendingOps(s.deployment()); len(ops) != 0 {
			t.Errorf("%d pending operations after the recovery", len(ops))
		}
		s.must("up", "--yes", "--skip-preview")
		if got := strings.Join(names(t, ns), " "); got != "fixed generated-1a2b3c4d" {
			t.Errorf("objects %q, want the two the interrupted update made and nothing else", got)
		}
		if r := s.run("preview", "--expect-no-changes"); r.code != 0 {
			t.Errorf("preview after the recovery exited %d:\n%s", r.code, tail(r.stdout))
		}
	})

	t.Run("refresh --import-pending-creates forgets the creates without importing them (CLI v3.250)", func(t *testing.T) {
		// Why docs/recovery.md imports with `pulumi import`: the flag turns each create into a
		// pending import that nothing in this CLI's engine reads, and the refresh's new state
		// drops it. When a CLI upgrade makes this import, this test fails: change the docs.
		ns := namespace(t)
		s, fixed, _ := newPendingStack(t, kube, kubeconfig, ns, "flag-"+randomHex(t, 3))
		s.must("refresh", "--yes", "--import-pending-creates", fixed, "--import-pending-creates", ns+"/fixed")
		d := s.deployment()
		imported := false
		for _, r := range d["deployment"].(map[string]any)["resources"].([]any) {
			if r.(map[string]any)["urn"] == fixed {
				imported = true
			}
		}
		if imported || len(pendingOps(d)) != 1 {
			t.Errorf("after refresh --import-pending-creates: imported %v, %d pending (the other create); want not imported and 1 pending: the CLI imports now, docs/recovery.md can use the flag",
				imported, len(pendingOps(d)))
		}
		// And `pulumi stack import` of an exported copy drops the create still pending.
		file := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(file, []byte(s.must("stack", "export")), 0o600); err != nil {
			t.Fatal(err)
		}
		s.must("stack", "import", "--file", file)
		if n := len(pendingOps(s.deployment())); n != 0 {
			t.Errorf("%d pending operations after stack import; docs/recovery.md says it drops them", n)
		}
	})
}
