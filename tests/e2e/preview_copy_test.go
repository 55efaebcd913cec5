//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// assertPreviewCopy runs the CI preview's identity split for real (cmd/previewstack, the deploy
// and preview workflows): the deploy side copies the stack into <stack>-preview with every secret
// replaced and a passphrase of its own; the preview side, holding only that passphrase, writes
// the copy's config from the stack file with throw-away secrets and previews it. The preview must
// work without the stack's passphrase, show the stack's own names (no rename, no replacement),
// hold no secret of the stack anywhere, and the copy must refuse `pulumi up`.
func (s *stack) assertPreviewCopy(t *testing.T) {
	t.Helper()
	copyName := s.name + "-preview"
	tool := filepath.Join(t.TempDir(), "previewstack")
	build := exec.Command("go", "build", "-o", tool, "./cmd/previewstack")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/previewstack: %v\n%s", err, out)
	}
	copyPass := randomHex(t, 16)
	copyFile := filepath.Join(repoRoot, "Pulumi."+copyName+".yaml")
	t.Cleanup(func() {
		cmd := exec.Command("pulumi", "stack", "rm", "--yes", "--force", "--non-interactive", "--stack", copyName)
		cmd.Dir, cmd.Env = repoRoot, withEnv(s.env, "PULUMI_CONFIG_PASSPHRASE="+copyPass)
		_ = cmd.Run()
		_ = os.Remove(copyFile)
	})
	run := func(env []string, name string, args ...string) (string, string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = repoRoot, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		s.assertNoSecrets(filepath.Base(name)+" "+args[0], out.String()+errb.String())
		return out.String(), errb.String(), err
	}

	// The deploy job: both passphrases.
	if _, stderr, err := run(withEnv(s.env, "PREVIEW_CONFIG_PASSPHRASE="+copyPass), tool, "copy", "--stack", s.name); err != nil {
		t.Fatalf("previewstack copy: %v\n%s", err, stderr)
	} else {
		t.Log(strings.TrimSpace(stderr))
	}
	// The preview job: the copy's passphrase only; the stack's is nowhere in its environment.
	previewEnv := withEnv(s.env, "PULUMI_CONFIG_PASSPHRASE="+copyPass)
	for _, kv := range previewEnv {
		if strings.Contains(kv, s.passphrase()) {
			t.Fatalf("the preview's environment holds the stack's passphrase (%s)", strings.SplitN(kv, "=", 2)[0])
		}
	}
	if _, stderr, err := run(previewEnv, tool, "prepare", "--stack", s.name); err != nil {
		t.Fatalf("previewstack prepare: %v\n%s", err, stderr)
	}
	out, stderr, err := run(previewEnv, "pulumi", "preview", "--json", "--non-interactive", "--stack", copyName)
	if err != nil {
		t.Fatalf("pulumi preview of the copy: %v\n%s\n%s", err, tail(out), tail(stderr))
	}
	var p struct {
		Steps []struct {
			Op       string   `json:"op"`
			URN      string   `json:"urn"`
			DiffKeys []string `json:"diffKeys"`
		} `json:"steps"`
		ChangeSummary map[string]int `json:"changeSummary"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("preview --json: %v\n%s", err, tail(out))
	}
	// Only what the secrets make differ may change: the copy's throw-away secrets differ from the
	// scrubbed values, so the Secrets that hold them (Jupyter's, the ring's ssh keys derived from
	// the seed) show as changing (replaced: Kolotoc's Secrets are immutable), and the local
	// cluster's kubeconfig carries a client certificate, which the copy drops, so the Kubernetes
	// provider shows an update (a cloud's exec-plugin kubeconfig holds none and stays the same:
	// cmd/previewstack's tests). Nothing is renamed, created or deleted.
	var changed []string
	for _, st := range p.Steps {
		if st.Op == "same" {
			continue
		}
		key := urnKey(st.URN)
		changed = append(changed, st.Op+" "+key+" "+strings.Join(st.DiffKeys, ","))
		typ := strings.SplitN(key, "::", 2)[0]
		switch {
		case typ == "kubernetes:core/v1:Secret" && (st.Op == "update" || st.Op == "replace"):
		case (typ == "pulumi:providers:kubernetes" || typ == "pulumi:pulumi:Stack") && st.Op == "update":
		default:
			t.Errorf("%s %s (diff %v): a preview copy may show changes only where the secrets differ", st.Op, key, st.DiffKeys)
		}
	}
	sort.Strings(changed)
	t.Logf("the copy's preview: %v; changes:\n  %s", p.ChangeSummary, strings.Join(changed, "\n  "))
	if p.ChangeSummary["same"] < 30 {
		t.Errorf("the copy's preview leaves %d resources the same: it did not see the stack's resources", p.ChangeSummary["same"])
	}

	// No secret of the stack in any file of the backend that belongs to the copy.
	for path, text := range s.stateFiles() {
		if strings.Contains(path, copyName) {
			s.assertNoSecrets("the copy's state file "+path, text)
			if strings.Contains(text, "PRIVATE KEY") {
				t.Errorf("the copy's state file %s holds a private key", path)
			}
		}
	}
	if b, err := os.ReadFile(copyFile); err != nil {
		t.Fatal(err)
	} else {
		s.assertNoSecrets(copyFile, string(b))
	}

	// The copy is never deployed.
	_, stderr, err = run(previewEnv, "pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--stack", copyName)
	if err == nil || !strings.Contains(stderr+out, "previewOf") {
		t.Errorf("pulumi up of the preview copy: %v, want it refused naming kolotoc:previewOf\n%s", err, tail(stderr))
	}
}

// passphrase is the stack's own PULUMI_CONFIG_PASSPHRASE.
func (s *stack) passphrase() string {
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "PULUMI_CONFIG_PASSPHRASE="); ok {
			return v
		}
	}
	s.t.Fatal("the stack has no passphrase")
	return ""
}

// withEnv is env with each KEY=VALUE of set in place of any earlier setting of KEY.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		keep := true
		for _, s := range set {
			if strings.SplitN(kv, "=", 2)[0] == strings.SplitN(s, "=", 2)[0] {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
