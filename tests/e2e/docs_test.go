//go:build e2e

package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kolotoc/testbed/checks/doccheck"
)

// TestDocCommands runs the README's {exec} shell blocks as written, in order, as a new user would:
// `make up` of the dev stack, the tour's kubectl and pulumi commands, a run started through the
// committed stack file and testbed/stack/stack.sh, a secret of one's own, and the workloads
// example's `STACK=workloads make up` (testbed/checks/doccheck says how blocks are marked; the unit
// tests check every other block is marked). It runs in a scratch copy of the checkout, so the
// commands may edit and copy stack files, with its own state and tool links under the copy's
// .kolotoc; its local cluster and real node are the suite's (links to this checkout's .kolotoc/kwok
// and node), and its .kolotoc/kubeconfig, the dev stack's default, is the suite's cluster. It holds
// the real node.
func TestDocCommands(t *testing.T) {
	t.Parallel() // see doc.go
	kubeconfig, _ := localCluster(t)
	lockRealNode(t, 1500) // the dev stack (1400m), then the workloads example
	for _, st := range []string{"dev", "workloads"} {
		ownNamespace(t, "kolotoc-"+st)
	}
	copyDir := scratchCheckout(t, kubeconfig)

	blocks, err := doccheck.FileBlocks(repoRoot, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The user's environment, as a new shell has it: no PULUMI_* or KUBECONFIG, and PATH without
	// this checkout's .kolotoc/bin (the copy links its own tools; testbed/tools/tools.sh would
	// otherwise take this checkout's links for tools found on PATH).
	var env []string
	ownBin := filepath.Join(repoRoot, ".kolotoc", "bin")
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "PULUMI_"), strings.HasPrefix(kv, "KUBECONFIG="):
		case strings.HasPrefix(kv, "PATH="):
			var keep []string
			for _, d := range filepath.SplitList(strings.TrimPrefix(kv, "PATH=")) {
				if filepath.Clean(d) != ownBin {
					keep = append(keep, d)
				}
			}
			env = append(env, "PATH="+strings.Join(keep, string(os.PathListSeparator)))
		case strings.HasPrefix(kv, "KOLOTOC_REAL_NODE="):
		default:
			env = append(env, kv)
		}
	}
	// The suite's real node is up already (testbed/cluster/cluster.sh up started it). The copy's
	// `make up` must not set it up again: testbed/node/node.sh would rewrite the node's
	// configuration with the copy's paths and restart its daemons under the other tests' pods, and
	// those paths vanish with the copy (seen: every sandbox after the test failed on the pause
	// image).
	env = append(env, "KOLOTOC_REAL_NODE=0")
	// Whatever happens, the copy's stacks are destroyed; `make down` is not used for that, as it
	// would stop the suite's cluster once no stack of the copy is left.
	t.Cleanup(func() {
		for _, st := range []string{"workloads", "dev"} {
			if _, err := os.Stat(filepath.Join(copyDir, ".kolotoc", "stacks", st, "effective.yaml")); err != nil {
				continue
			}
			script := `eval "$(testbed/stack/stack.sh env)"; pulumi destroy --yes --stack ` + st + ` --config-file .kolotoc/stacks/` + st + `/effective.yaml`
			if out, err := runBlock(copyDir, env, script, 15*time.Minute); err != nil {
				t.Errorf("destroying stack %s of the copy: %v\n%s", st, err, tail(out))
			}
		}
	})
	var ran int
	for _, b := range blocks {
		if b.Marker != "exec" {
			continue
		}
		ran++
		start := time.Now()
		out, err := runBlock(copyDir, env, b.Body, 30*time.Minute)
		t.Logf("%s (%.0f s):\n%s", b.Where(), time.Since(start).Seconds(), b.Body)
		if err != nil {
			t.Fatalf("%s, as the README writes it, failed: %v\n%s", b.Where(), err, tail(out))
		}
	}
	if ran < 4 {
		t.Fatalf("only %d {exec} blocks in README.md: the tour is not being run", ran)
	}
}

func runBlock(dir string, env []string, script string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// scratchCheckout copies the checkout's files (tracked, and new ones not ignored) into a temporary
// directory, with the local test bed's shared parts linked: the cluster's and the real node's
// state, and the suite's kubeconfig as the copy's default one.
func scratchCheckout(t *testing.T, kubeconfig string) string {
	t.Helper()
	dir := t.TempDir()
	ls := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	ls.Dir = repoRoot
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" || strings.HasPrefix(filepath.Base(f), "Pulumi.e2e") {
			continue
		}
		src := filepath.Join(repoRoot, f)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if err := copyFile(src, filepath.Join(dir, f), st.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	// A repository of its own, as a checkout is: the tour puts a changed stack file back with git.
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=doc test", "-c", "user.email=doc@test.invalid", "commit", "-qm", "scratch copy"}} {
		git := exec.Command("git", args...)
		git.Dir = dir
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git %v in the copy: %v\n%s", args, err, out)
		}
	}
	kolotoc := filepath.Join(dir, ".kolotoc")
	if err := os.MkdirAll(kolotoc, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, shared := range []string{"kwok", "node"} {
		if err := os.Symlink(filepath.Join(repoRoot, ".kolotoc", shared), filepath.Join(kolotoc, shared)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(kubeconfig, filepath.Join(kolotoc, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
