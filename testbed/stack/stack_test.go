package stack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakePulumi plays the CLI for testbed/stack/stack.sh: like the real one it needs Pulumi.yaml in
// its working directory; `stack ls --json` prints $FAKE_STACKS (or fails with FAKE_LS_FAIL set).
const fakePulumi = `#!/usr/bin/env bash
echo "pulumi $*" >>"$FAKE_LOG"
# As the Kubernetes provider does at each start (writeKubeconfigToFile), with FAKE_PROVIDER set.
[ -z "${FAKE_PROVIDER:-}" ] || mktemp "${TMPDIR:-/tmp}/kubeconfigXXXXXXXX" >/dev/null
[ -f Pulumi.yaml ] || { echo "error: no Pulumi.yaml project file found" >&2; exit 255; }
case "$1 $2" in
  "stack ls") [ -z "${FAKE_LS_FAIL:-}" ] || exit 1; printf '%s\n' "$FAKE_STACKS" ;;
  "config get") echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef ;;
  # The value of a secret comes on stdin; read only with FAKE_SECRET_IN (a pulumi may exit unread).
  "config set") [ -z "${FAKE_SECRET_IN:-}" ] || cat >"$FAKE_SECRET_IN" ;;
esac
exit 0
`

// fakeTools plays testbed/tools/tools.sh: it records its calls (the stack installs the provider
// plugin into its PULUMI_HOME before running pulumi) and succeeds.
const fakeTools = `#!/usr/bin/env bash
echo "tools $*" >>"$FAKE_LOG"
exit 0
`

// fakeCluster plays testbed/cluster/cluster.sh: it records its calls; the cluster runs (status 0).
const fakeCluster = `#!/usr/bin/env bash
echo "cluster $*" >>"$FAKE_LOG"
exit 0
`

// fakeCheckout writes a checkout under root in which stack.sh (with the test bed's lib.sh) runs
// against fakePulumi, fakeTools and fakeCluster, plus the extra files (paths relative to root,
// or absolute).
func fakeCheckout(t *testing.T, root string, extra map[string]string) {
	t.Helper()
	files := map[string]string{
		"testbed/cluster/cluster.sh": fakeCluster,
		"testbed/tools/tools.sh":     fakeTools,
		".kolotoc/bin/pulumi":        fakePulumi,
		"Pulumi.yaml":                "name: kolotoc\nruntime: go\n",
	}
	for path, src := range map[string]string{"testbed/stack/stack.sh": "stack.sh", "testbed/lib.sh": "../lib.sh"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = string(b)
	}
	for path, content := range extra {
		files[path] = content
	}
	for path, content := range files {
		p := path
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, path)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDownKeepsSharedCluster: `make down` (testbed/stack/stack.sh down) destroys its stack and
// deletes the local cluster only when no other stack still has resources in it, wherever it is run
// from; when it cannot tell (the stack list fails), the cluster stays.
func TestDownKeepsSharedCluster(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is not installed: testbed/stack/stack.sh needs it; `make unit` installs it (testbed/node/node.sh packages)")
	}
	for _, tc := range []struct {
		name, stacks string
		lsFails      bool
		wantDown     bool
	}{
		{name: "another stack deployed", stacks: `[{"name":"dev","resourceCount":0},{"name":"e2e-shape","resourceCount":12}]`},
		{name: "only empty stacks left", stacks: `[{"name":"dev","resourceCount":0},{"name":"old"}]`, wantDown: true},
		{name: "the stack list fails", lsFails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			fakeCheckout(t, root, nil)
			log := filepath.Join(root, "calls.log")
			cmd := exec.Command("bash", filepath.Join(root, "testbed", "stack", "stack.sh"), "down")
			cmd.Dir = t.TempDir() // not the checkout: the script must find its project itself
			cmd.Env = append(os.Environ(), "STACK=dev", "FAKE_LOG="+log, "FAKE_STACKS="+tc.stacks, "KOLOTOC_KUBECONFIG=")
			if tc.lsFails {
				cmd.Env = append(cmd.Env, "FAKE_LS_FAIL=1")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("stack.sh down: %v\n%s", err, out)
			}
			b, _ := os.ReadFile(log)
			calls := string(b)
			if !strings.Contains(calls, "pulumi destroy --yes --stack dev") {
				t.Errorf("the stack was not destroyed; calls:\n%s\noutput:\n%s", calls, out)
			}
			if down := strings.Contains(calls, "cluster down"); down != tc.wantDown {
				t.Errorf("cluster deleted: %v, want %v; calls:\n%s\noutput:\n%s", down, tc.wantDown, calls, out)
			}
			if !tc.wantDown && !strings.Contains(string(out), "keeping the local cluster") {
				t.Errorf("does not say it keeps the cluster:\n%s", out)
			}
		})
	}
}

// TestNoKubeconfigCopyLeft: the Kubernetes provider copies its kubeconfig (the cluster's admin
// credentials) into a new file of $TMPDIR at each start and never removes it; stack.sh gives the
// commands it runs a private TMPDIR of the run's own under .kolotoc/tmp (another run's provider may
// still read its copy there) and leaves nothing behind, there or in the caller's TMPDIR.
func TestNoKubeconfigCopyLeft(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is not installed: testbed/stack/stack.sh needs it; `make unit` installs it (testbed/node/node.sh packages)")
	}
	root, callerTmp := t.TempDir(), t.TempDir()
	fakeCheckout(t, root, nil)
	log := filepath.Join(root, "calls.log")
	cmd := exec.Command("bash", filepath.Join(root, "testbed", "stack", "stack.sh"), "down")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "STACK=dev", "FAKE_LOG="+log, "FAKE_STACKS=[]", "KOLOTOC_KUBECONFIG=",
		"FAKE_PROVIDER=1", "TMPDIR="+callerTmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stack.sh down: %v\n%s", err, out)
	}
	for _, pattern := range []string{filepath.Join(callerTmp, "kubeconfig*"), filepath.Join(root, ".kolotoc", "tmp", "*")} {
		left, _ := filepath.Glob(pattern)
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "pulumi destroy") {
		t.Errorf("stack.sh down ran no pulumi command; calls:\n%s", b)
	}
}

// TestPreviewReusesPreparedConfig: a second `testbed/stack/stack.sh preview` with nothing changed
// makes one Pulumi CLI call, the preview itself: the stack's effective config is rebuilt (five CLI
// calls, about 3 s of every preview and up) only when the committed stack file or the secrets file
// changed, or the stack is gone from the state.
func TestPreviewReusesPreparedConfig(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, ".kolotoc/state/.pulumi/stacks/kolotoc/dev.json")
	fakeCheckout(t, root, map[string]string{
		"Pulumi.dev.yaml":     "config:\n  kolotoc:cloud: simulated\n",
		".kolotoc/passphrase": "test-passphrase",
		state:                 "{}",
	})
	log := filepath.Join(root, "calls.log")
	preview := func() []string {
		t.Helper()
		_ = os.Remove(log)
		cmd := exec.Command("bash", filepath.Join(root, "testbed", "stack", "stack.sh"), "preview")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "STACK=dev", "FAKE_LOG="+log, "KOLOTOC_KUBECONFIG=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("stack.sh preview: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(log)
		var calls []string // of pulumi (testbed/tools/tools.sh's plugin install is not a pulumi call)
		for _, c := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(c, "pulumi ") {
				calls = append(calls, c)
			}
		}
		return calls
	}
	full := func(calls []string) bool {
		return len(calls) > 1 && strings.Contains(strings.Join(calls, "\n"), "config set-all")
	}

	if calls := preview(); !full(calls) {
		t.Fatalf("first preview did not prepare the stack: %v", calls)
	}
	if calls := preview(); len(calls) != 1 || !strings.HasPrefix(calls[0], "pulumi preview") {
		t.Errorf("second preview with nothing changed: %v, want the preview alone", calls)
	}
	if err := os.WriteFile(filepath.Join(root, "Pulumi.dev.yaml"), []byte("config:\n  kolotoc:cloud: simulated\n  kolotoc:suspend: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if calls := preview(); !full(calls) {
		t.Errorf("a changed stack file did not rebuild the effective config: %v", calls)
	}
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if calls := preview(); !full(calls) {
		t.Errorf("a stack gone from the state did not prepare it again: %v", calls)
	}
}

// TestSecretTakesADottedServerWhole: `stack.sh secret kolotoc:registryPasswords.ghcr.io` (as
// docs/using/configuration.md shows it) sets the password of server "ghcr.io", Pulumi's path
// kolotoc:registryPasswords["ghcr.io"]; passed through as written, Pulumi splits the path at
// every dot and writes {ghcr: {io: …}}, which the program refuses. Pulumi's own bracket form and
// an undotted key pass unchanged; the value goes by stdin, never argv.
func TestSecretTakesADottedServerWhole(t *testing.T) {
	root := devStackCheckout(t)
	for key, want := range map[string]string{
		"kolotoc:registryPasswords.ghcr.io":                      `--path kolotoc:registryPasswords["ghcr.io"] `,
		"kolotoc:registryPasswords.europe-docker.pkg.dev":        `--path kolotoc:registryPasswords["europe-docker.pkg.dev"] `,
		`kolotoc:registryPasswords["registry.example.com:5000"]`: `--path kolotoc:registryPasswords["registry.example.com:5000"] `,
		"kolotoc:storage.accountKey":                             `--path kolotoc:storage.accountKey `,
	} {
		log := filepath.Join(root, "calls.log")
		_ = os.Remove(log)
		cmd := exec.Command("bash", filepath.Join(root, "testbed", "stack", "stack.sh"), "secret", key)
		cmd.Dir = root
		cmd.Stdin = strings.NewReader("s3cret-token")
		in := filepath.Join(root, "stdin")
		cmd.Env = append(os.Environ(), "STACK=dev", "FAKE_LOG="+log, "FAKE_STACKS=[]", "KOLOTOC_KUBECONFIG=", "FAKE_SECRET_IN="+in)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("stack.sh secret %s: %v\n%s", key, err, out)
		}
		if b, _ := os.ReadFile(in); string(b) != "s3cret-token" {
			t.Errorf("secret %s: pulumi read %q on stdin, want the value", key, b)
		}
		b, _ := os.ReadFile(log)
		var set string
		for _, c := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(c, "pulumi config set --secret") {
				set = c
			}
		}
		if !strings.Contains(set+" ", want) || strings.Contains(string(b), "s3cret-token") {
			t.Errorf("secret %s: pulumi called as %q, want %q (and the value never in argv)", key, set, want)
		}
	}
}

// TestSecretSurvivesAPulumiThatDoesNotRead: a pulumi that exits 0 without reading its stdin must
// not fail the command. Fed by a pipe under pipefail, printf died of SIGPIPE (exit 141): CI saw it
// at random with a 12-byte value; a value larger than a pipe's buffer (64 KiB) makes it certain.
func TestSecretSurvivesAPulumiThatDoesNotRead(t *testing.T) {
	root := devStackCheckout(t)
	cmd := exec.Command("bash", filepath.Join(root, "testbed", "stack", "stack.sh"), "secret", "kolotoc:storage.accountKey")
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(strings.Repeat("k", 100<<10))
	cmd.Env = append(os.Environ(), "STACK=dev", "FAKE_LOG="+filepath.Join(root, "calls.log"), "FAKE_STACKS=[]", "KOLOTOC_KUBECONFIG=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stack.sh secret with a pulumi that exits unread: %v\n%s", err, out)
	}
}

// devStackCheckout is a fake checkout whose stack dev exists already (its passphrase and state),
// as `stack.sh secret` expects of a stack it sets a secret of.
func devStackCheckout(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	fakeCheckout(t, root, map[string]string{
		"Pulumi.dev.yaml":     "config:\n  kolotoc:cloud: simulated\n",
		".kolotoc/passphrase": "test-passphrase",
		filepath.Join(root, ".kolotoc/state/.pulumi/stacks/kolotoc/dev.json"): "{}",
	})
	return root
}
