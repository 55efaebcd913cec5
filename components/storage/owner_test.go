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

// TestOwnerJob: with an Owner, one Job gives the claim's root to the uid, after the claim is bound,
// as root with CAP_CHOWN alone; pods wait for it (Storage.Ready). Without one there is no Job and
// pods wait for the claim alone.
func TestOwnerJob(t *testing.T) {
	const jobKey = "kubernetes:batch/v1:Job::storage-owner"
	m, ready := runStorage(t, localArgs(&Owner{UID: 1000, Image: "kolotoc.local/mpi:1", Pool: "node"}))
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
	c := pod["containers"].ArrayValue()[0].ObjectValue()
	args := c["args"].ArrayValue()
	if len(args) != 2 || args[0].StringValue() != "/shared" || args[1].StringValue() != "1000:1000" {
		t.Errorf("owner args %v, want [/shared 1000:1000]", args)
	}
	sc := c["securityContext"].ObjectValue()
	if sc["runAsUser"].NumberValue() != 0 || sc["runAsNonRoot"].BoolValue() || sc["allowPrivilegeEscalation"].BoolValue() {
		t.Errorf("owner container security %v: want root, no escalation", sc)
	}
	caps := sc["capabilities"].ObjectValue()
	if add := caps["add"].ArrayValue(); len(add) != 1 || add[0].StringValue() != "CHOWN" {
		t.Errorf("owner capabilities add %v, want [CHOWN] alone", add)
	}
	if drop := caps["drop"].ArrayValue(); len(drop) != 1 || drop[0].StringValue() != "ALL" {
		t.Errorf("owner capabilities drop %v, want [ALL]", drop)
	}
	claim := pod["volumes"].ArrayValue()[0].ObjectValue()["persistentVolumeClaim"].ObjectValue()["claimName"]
	if claim != resource.NewStringProperty("shared") {
		t.Errorf("owner mounts claim %v, want shared", claim)
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
