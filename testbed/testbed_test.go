// Package testbed holds the tests that span the test bed's scripts (testbed/*/*.sh, testbed/lib.sh)
// and the Makefile that runs them; each script's own tests sit beside it.
package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestE2ERunsOnAClusterOfItsOwn: `make up` leaves the dev stack running on the default local
// cluster, where it holds most of the real node's two CPUs; `make test` after it (the README's
// order) timed out with the suite's pods "Insufficient cpu". The suite runs on a cluster of its
// own: every command of `make e2e` and `make test` that starts, names or uses a cluster must say
// which, and not the default one.
func TestE2ERunsOnAClusterOfItsOwn(t *testing.T) {
	// make -n prints e2e's commands without running them. (Not `make -n test`: make runs a
	// recipe line holding $(MAKE) even under -n, and test's starts a cluster.)
	out, err := exec.Command("make", "-C", "..", "-n", "--no-print-directory", "e2e").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n e2e: %v\n%s", err, out)
	}
	uses := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "testbed/cluster/cluster.sh") && !strings.Contains(line, "go test -tags e2e") {
			continue
		}
		uses++
		if c := clusterOf(line); c == "" || c == "kolotoc" {
			t.Errorf("make e2e runs %q on the default cluster, the one make up deploys to", line)
		}
	}
	if uses == 0 {
		t.Errorf("make -n e2e starts no cluster and runs no e2e suite:\n%s", out)
	}
	// make test wraps make e2e in `testbed/cluster/cluster.sh with`, which must put back the same
	// cluster.
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// (directly, or through e2e-beside-unit, which runs make e2e beside make unit)
	with := regexp.MustCompile(`(?m)^\t(.*)testbed/cluster/cluster\.sh with .*\b(e2e|e2e-beside-unit)$`).FindSubmatch(makefile)
	if with == nil {
		t.Fatal("make test does not run make e2e under testbed/cluster/cluster.sh with")
	}
	if string(with[2]) == "e2e-beside-unit" {
		recipe := regexp.MustCompile(`(?ms)^e2e-beside-unit:\n(.*?)\n\n`).FindSubmatch(makefile)
		if recipe == nil || !regexp.MustCompile(`\$\(MAKE\) [^;&]*\be2e\b`).Match(recipe[1]) {
			t.Fatal("make test runs e2e-beside-unit under testbed/cluster/cluster.sh with, whose recipe runs no make e2e")
		}
	}
	if !strings.Contains(string(with[1]), "$(E2E_CLUSTER)") {
		t.Errorf("make test runs `testbed/cluster/cluster.sh with` without $(E2E_CLUSTER): it would start, and then put back, the default cluster")
	}
}

// clusterOf is the KOLOTOC_CLUSTER a shell line sets, or "".
func clusterOf(line string) string {
	if m := regexp.MustCompile(`KOLOTOC_CLUSTER=(\S+)`).FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// TestScriptsUseTheClustersKubeconfig: every script that talks to the local cluster takes its
// kubeconfig from KOLOTOC_KUBECONFIG, defaulting to .kolotoc/kubeconfig. testbed/node/node.sh read
// the default cluster's file directly: beside a running default cluster it checked that cluster's
// node and passed by accident; in a fresh clone (CI) make test's cluster never came up ("timed out
// waiting for node kolotoc-node to be Ready").
func TestScriptsUseTheClustersKubeconfig(t *testing.T) {
	scripts := scripts(t)
	fixed := regexp.MustCompile(`\.kolotoc/kubeconfig\b`)
	allowed := regexp.MustCompile(`\$\{KOLOTOC_KUBECONFIG:-[^}]*\.kolotoc/kubeconfig\}`)
	for _, name := range scripts {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if fixed.MatchString(allowed.ReplaceAllString(line, "")) {
				t.Errorf("%s:%d names the default cluster's kubeconfig, not ${KOLOTOC_KUBECONFIG:-…}: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// scripts are the test bed's shell scripts: the shared library and each role's script.
func scripts(t *testing.T) []string {
	t.Helper()
	roles, err := filepath.Glob("*/*.sh")
	if err != nil || len(roles) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	return append([]string{"lib.sh"}, roles...)
}

// TestScriptsShareOneLibrary: the helpers every script needs (logging, waiting, the built tools,
// pid files, the cluster's names) live once, in lib.sh. They were copied across five scripts and
// had drifted (two ways to tell a zombie, two polling intervals). Every script sources lib.sh,
// and none defines a function lib.sh defines.
func TestScriptsShareOneLibrary(t *testing.T) {
	lib, err := os.ReadFile("lib.sh")
	if err != nil {
		t.Fatal(err)
	}
	def := regexp.MustCompile(`(?m)^([a-z_][a-z0-9_]*)\(\) \{`)
	shared := map[string]bool{}
	for _, m := range def.FindAllStringSubmatch(string(lib), -1) {
		shared[m[1]] = true
	}
	if len(shared) < 5 {
		t.Fatalf("lib.sh defines %d functions: %v", len(shared), shared)
	}
	for _, name := range scripts(t)[1:] {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `. "$(dirname "$0")/../lib.sh"`) {
			t.Errorf("%s does not source lib.sh", name)
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			if shared[m[1]] {
				t.Errorf("%s defines %s(), which lib.sh already does", name, m[1])
			}
		}
	}
}

// TestNodeKeepsItsImages: the real node's images are imported from the image cache, never pulled
// (no registry is reachable). The kubelet must never delete them: not by image garbage collection,
// and not by the eviction manager's disk-pressure reclaim, which deletes every image no running
// container uses. With `nodefs.available: 1%` a machine whose disk filled up (another build's
// cache) lost the pause image on both of its nodes, and no pod could start again until the images
// were imported again by hand.
func TestNodeKeepsItsImages(t *testing.T) {
	script, err := os.ReadFile("node/node.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^imageGCHighThresholdPercent: 100$`),
		regexp.MustCompile(`(?m)^evictionHard: \{[^}]*nodefs\.available: "0%"`),
		regexp.MustCompile(`(?m)^evictionHard: \{[^}]*imagefs\.available: "0%"`),
	} {
		if !want.Match(script) {
			t.Errorf("testbed/node/node.sh's kubelet configuration does not match %s: the kubelet could delete images it can never pull back", want)
		}
	}
}

// TestPreflight: testbed/preflight.sh, which make up, cluster, test and e2e run before any build,
// fails at once for a user who is not root, naming the cause and the sudo line that keeps Go's
// caches; fails on too little disk, naming the filesystem; and passes on this machine as root
// (the suite's). Every check runs, so one run lists every problem. make's targets run it first.
func TestPreflight(t *testing.T) {
	run := func(asNobody bool, env ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("bash", "preflight.sh", "up")
		if asNobody {
			cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "preflight.sh", "up")
		}
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if os.Getuid() != 0 {
		out, err := run(false)
		if err == nil || !strings.Contains(out, "not root") {
			t.Errorf("as uid %d: %v\n%s; want a failure naming root", os.Getuid(), err, out)
		}
		return
	}
	if out, err := run(false); err != nil {
		t.Errorf("as root on the suite's machine: %v\n%s", err, out)
	}
	out, err := run(true, "HOME="+t.TempDir())
	if err == nil || !strings.Contains(out, "not root (uid 65534)") || !strings.Contains(out, `sudo env PATH="$PATH" HOME="$HOME"`) ||
		!strings.Contains(out, "make up") {
		t.Errorf("as nobody: %v\n%s; want a failure naming root and the sudo line for make up", err, out)
	}
	out, err = run(false, "KOLOTOC_PREFLIGHT_MIN_GB=100000000")
	if err == nil || !strings.Contains(out, "want at least 100000000 GB") || strings.Count(out, "FAIL:") < 1 {
		t.Errorf("with too little disk: %v\n%s; want a failure naming the filesystem and the need", err, out)
	}
	// The targets that build or start anything run it first.
	// (make -n test would run test's recursive make for real: its rule is read instead.)
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^test: preflight\b`).Match(mk) {
		t.Error("the Makefile's test target does not run the preflight first")
	}
	for _, target := range []string{"up", "cluster", "e2e"} {
		cmd := exec.Command("make", "--no-print-directory", "-n", target)
		cmd.Dir = ".."
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n %s: %v", target, err)
		}
		if first, _, _ := strings.Cut(string(b), "\n"); first != "testbed/preflight.sh "+target {
			t.Errorf("make -n %s: first command %q, want the preflight", target, first)
		}
	}
}

// TestUpBuildsOnlyItsStacksImages: make up's cluster builds and imports only the local images its
// stack's file names, and pause (the dev stack: dask, mpi, pause; not prometheus, torch, tfprobe,
// etcd, which took minutes of a cold make up); a stack file naming another image adds it; make
// test's cluster (no KOLOTOC_NODE_IMAGES) builds them all; stack.sh up brings what a later stack
// needs.
func TestUpBuildsOnlyItsStacksImages(t *testing.T) {
	// A prerequisite of up that shows, under make -n, what up exports to its prerequisites.
	cmd := exec.Command("make", "--no-print-directory", "-n", "up",
		"--eval", "up: show-images", "--eval", "show-images: ; @echo images: $(KOLOTOC_NODE_IMAGES)")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n up: %v", err)
	}
	if !strings.Contains(string(out), "echo images: dask mpi pause\n") {
		t.Errorf("make -n up: %s; want KOLOTOC_NODE_IMAGES dask mpi pause (the dev stack's)", out)
	}
	stack := filepath.Join(t.TempDir(), "Pulumi.x.yaml")
	if err := os.WriteFile(stack, []byte("config:\n  kolotoc:elastic:\n    image: kolotoc.local/torch:0123456789ab\n  kolotoc:x: kolotoc.local/nosuchrecipe:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("bash", "images/images.sh", "needs", stack).Output(); err != nil || string(b) != "pause\ntorch\n" {
		t.Errorf("images.sh needs: %q (%v), want pause and torch (a name without a recipe left out)", b, err)
	}
	node, err := os.ReadFile("node/node.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(node), `read -r -a images <<<"${KOLOTOC_NODE_IMAGES:-}"`) {
		t.Error("node.sh up does not read KOLOTOC_NODE_IMAGES")
	}
	st, err := os.ReadFile("stack/stack.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?s)cmd_up\(\) \{\n  prepare\n  local_images\n`).Match(st) {
		t.Error("stack.sh up does not bring the stack's images to the node before pulumi up")
	}
}
