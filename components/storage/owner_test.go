package storage

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// runStorage registers the storage with args and returns what the mock saw, and Storage.Ready's
// URNs.
func runStorage(t *testing.T, args *Args) (*mocks, []string) {
	t.Helper()
	m := &mocks{reg: map[string]registration{}}
	var (
		mu    sync.Mutex
		ready []string
	)
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		s, err := New(ctx, "storage", args)
		if err != nil {
			return err
		}
		for _, r := range s.Ready {
			r.URN().ApplyT(func(u pulumi.URN) error {
				mu.Lock()
				defer mu.Unlock()
				ready = append(ready, string(u))
				return nil
			})
		}
		return nil
	}, pulumi.WithMocks("kolotoc", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
	return m, ready
}

func localArgs(owner *Owner) *Args {
	return &Args{
		Namespace: pulumi.String("kolotoc-dev"), NamespaceDNS: "kolotoc-dev", VolumeName: "kolotoc-dev-shared",
		ClaimName: "shared", HostPath: "/var/lib/kolotoc/kolotoc-dev/shared", Size: "10Gi",
		Labels: meta.Labels{Instance: "dev"}, Owner: owner,
	}
}

// TestOwnerJob: with an Owner, one Job gives the claim's root to the uid (an init container, as
// root with CAP_CHOWN alone) and then checks, as the uid with no capability, that the root and
// the workloads' directories can be written; after the claim is bound; pods wait for it
// (Storage.Ready). On a store the stack only mounts there is no chown, the check alone. Without
// an Owner there is no Job and pods wait for the claim alone.
func TestOwnerJob(t *testing.T) {
	const jobKey = "kubernetes:batch/v1:Job::storage-owner"
	m, ready := runStorage(t, localArgs(&Owner{UID: 1000, Image: "kolotoc.local/mpi:1", Pool: "node", Chown: true,
		MountPath: "/data", Dirs: []string{"checkpoints", "logs/tfcluster"}}))
	job, ok := m.reg[jobKey]
	if !ok {
		t.Fatalf("no owner Job among %v", keys(m.reg))
	}
	if !slices.Contains(job.deps, "kubernetes:core/v1:PersistentVolumeClaim::storage") {
		t.Errorf("the owner Job does not wait for the claim: depends on %v", job.deps)
	}
	// The URNs resolve in any order.
	slices.Sort(ready)
	if len(ready) != 2 || !strings.HasSuffix(ready[0], "kubernetes:batch/v1:Job::storage-owner") ||
		!strings.HasSuffix(ready[1], "kubernetes:core/v1:PersistentVolumeClaim::storage") {
		t.Errorf("Storage.Ready = %v, want the claim and the owner Job", ready)
	}
	pod := job.inputs["spec"].ObjectValue()["template"].ObjectValue()["spec"].ObjectValue()
	c := pod["initContainers"].ArrayValue()[0].ObjectValue()
	args := c["args"].ArrayValue()
	if len(args) != 2 || args[0].StringValue() != "/data" || args[1].StringValue() != "1000:1000" {
		t.Errorf("chown args %v, want [/data 1000:1000]", args)
	}
	sc := c["securityContext"].ObjectValue()
	if sc["runAsUser"].NumberValue() != 0 || sc["runAsNonRoot"].BoolValue() || sc["allowPrivilegeEscalation"].BoolValue() {
		t.Errorf("chown container security %v: want root, no escalation", sc)
	}
	caps := sc["capabilities"].ObjectValue()
	if add := caps["add"].ArrayValue(); len(add) != 1 || add[0].StringValue() != "CHOWN" {
		t.Errorf("chown capabilities add %v, want [CHOWN] alone", add)
	}
	if drop := caps["drop"].ArrayValue(); len(drop) != 1 || drop[0].StringValue() != "ALL" {
		t.Errorf("chown capabilities drop %v, want [ALL]", drop)
	}
	check := pod["containers"].ArrayValue()[0].ObjectValue()
	var cmd []string
	for _, v := range check["command"].ArrayValue() {
		cmd = append(cmd, v.StringValue())
	}
	if len(cmd) != 7 || cmd[2] != WritableScript || !slices.Equal(cmd[4:], []string{"/data", "/data/checkpoints", "/data/logs/tfcluster"}) {
		t.Errorf("check command %q, want the writable script over the root and the workloads' directories", cmd)
	}
	csc := check["securityContext"].ObjectValue()
	if csc["runAsUser"].NumberValue() != 1000 || !csc["runAsNonRoot"].BoolValue() || csc["capabilities"].ObjectValue()["add"].IsArray() {
		t.Errorf("check container security %v: want uid 1000, non-root, no capability", csc)
	}
	claim := pod["volumes"].ArrayValue()[0].ObjectValue()["persistentVolumeClaim"].ObjectValue()["claimName"]
	if claim != resource.NewStringProperty("shared") {
		t.Errorf("owner mounts claim %v, want shared", claim)
	}

	// A store the stack does not own: checked, never chowned.
	m, _ = runStorage(t, localArgs(&Owner{UID: 1000, Image: "kolotoc.local/mpi:1", Pool: "node"}))
	pod = m.reg[jobKey].inputs["spec"].ObjectValue()["template"].ObjectValue()["spec"].ObjectValue()
	if pod["initContainers"].IsArray() && len(pod["initContainers"].ArrayValue()) > 0 {
		t.Errorf("a store the stack does not own is chowned: %v", pod["initContainers"])
	}
	if name := pod["containers"].ArrayValue()[0].ObjectValue()["name"].StringValue(); name != "check" {
		t.Errorf("container %s, want the check", name)
	}

	m, ready = runStorage(t, localArgs(nil))
	if _, ok := m.reg[jobKey]; ok {
		t.Error("an owner Job without an Owner")
	}
	if len(ready) != 1 || !strings.HasSuffix(ready[0], "kubernetes:core/v1:PersistentVolumeClaim::storage") {
		t.Errorf("Storage.Ready = %v, want the claim alone", ready)
	}
}

// fakeStore stands in for a store under the owner's script: stat prints its root's owner, chown
// records its arguments and, unless the store refuses, gives the root to its first argument. The
// real chown, as root on a real store, is the real node's (TestDevStackRunsForReal's shared-owner
// Job).
type fakeStore struct{ bin, state, calls string }

func newFakeStore(t *testing.T, owner string, refuse bool) *fakeStore {
	t.Helper()
	dir := t.TempDir()
	f := &fakeStore{bin: filepath.Join(dir, "bin"), state: filepath.Join(dir, "owner"), calls: filepath.Join(dir, "calls")}
	chown := "echo \"$*\" >>" + f.calls + "\necho \"$1\" >" + f.state + "\n"
	if refuse { // as an NFS server with root squash answers
		chown = "echo \"$*\" >>" + f.calls + "\necho \"chown: changing ownership of '$2': Operation not permitted\" >&2\nexit 1\n"
	}
	if err := os.Mkdir(f.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"stat": "cat " + f.state + "\n", "chown": chown} {
		if err := os.WriteFile(filepath.Join(f.bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.state, []byte(owner+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs the owner's script as the Job does, giving the store's root to want.
func (f *fakeStore) run(want string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", OwnerScript, "shared-owner", "/shared", want)
	cmd.Env = []string{"PATH=" + f.bin + ":/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (f *fakeStore) read(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// TestOwnerScript: a root that belongs to root is given to the uid, the directory alone (one
// chown, not recursive: files already there keep their owner), and a second run changes nothing
// and says so.
func TestOwnerScript(t *testing.T) {
	f := newFakeStore(t, "0:0", false)
	out, err := f.run("1000:1000")
	if err != nil {
		t.Fatalf("owner script: %v\n%s", err, out)
	}
	if !strings.Contains(out, "belonged to 0:0, now to 1000:1000") {
		t.Errorf("first run said %q", out)
	}
	if calls := f.read(f.calls); calls != "1000:1000 /shared" {
		t.Errorf("chown called as %q, want once, as `chown 1000:1000 /shared` (the directory only, not -R)", calls)
	}
	if out, err := f.run("1000:1000"); err != nil || !strings.Contains(out, "already belongs to 1000:1000") || f.read(f.calls) != "1000:1000 /shared" {
		t.Errorf("second run said %q (%v), chown calls %q: want no new call", out, err, f.read(f.calls))
	}
}

// TestOwnerScriptRefused: a store that refuses the chown fails the Job with what to do, instead
// of workloads that fail later on a directory they cannot write.
func TestOwnerScriptRefused(t *testing.T) {
	out, err := newFakeStore(t, "0:0", true).run("4242:4242")
	if err == nil {
		t.Fatalf("the script succeeded although chown failed:\n%s", out)
	}
	if !strings.Contains(out, "refused to give /shared (0:0) to 4242:4242") || !strings.Contains(out, "set kolotoc:runAsUser to 0") {
		t.Errorf("the failure does not say what to do:\n%s", out)
	}
}

// TestWritableScript runs the check as a real user (setpriv, as the kubelet would start it) on
// real directories: a root-owned tree fails, naming the directory, its owner and mode, and what to
// do; a subdirectory an older update left to root fails on its own; once given to the user it
// passes; a directory that does not exist yet is skipped.
func TestWritableScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to make files of another user: make test runs as root (the local cluster does too)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is missing")
	}
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} { // the test's directories are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(root, "shared")
	old := filepath.Join(shared, "checkpoints")
	for _, d := range []string{shared, old} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (string, error) {
		cmd := exec.Command(setpriv, "--reuid=4242", "--regid=4242", "--clear-groups", "/bin/sh", "-c", WritableScript, "shared-owner",
			shared, old, filepath.Join(shared, "logs"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err == nil || !strings.Contains(out, shared+" is not writable by uid 4242 (owner 0:0, mode 755)") || !strings.Contains(out, "chown 4242:4242") {
		t.Fatalf("a root-owned store passed the check or was not named (%v):\n%s", err, out)
	}
	if err := os.Chown(shared, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if out, err = run(); err == nil || !strings.Contains(out, old+" is not writable") || strings.Contains(out, shared+" is not") {
		t.Fatalf("an older root-owned subdirectory passed, or the root was named again (%v):\n%s", err, out)
	}
	if err := os.Chown(old, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if out, err = run(); err != nil || !strings.Contains(out, "writable by uid 4242") {
		t.Fatalf("a tree the user owns failed (%v):\n%s", err, out)
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 1 {
		t.Errorf("the check left files behind: %v", entries)
	}
}
