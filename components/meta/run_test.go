package meta

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCodeScriptClonesAsNobody runs the clone as a pod does: as nobody, in a directory that
// belongs to root (an emptyDir's root), left with files by an earlier attempt (a restarted init
// container), with the image's working directory closed to nobody. It needs root (to run as
// nobody), as the whole test bed does, and git, which the checkout itself needs.
func TestCodeScriptClonesAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root, to run the clone as nobody (the test bed runs as root)")
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("needs git: %v", err)
	}
	base, err := os.MkdirTemp("/tmp", "kolotoc-code-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	src := filepath.Join(base, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "train.py"), []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(src, "init", "-q", "-b", "main")
	run(src, "add", "-A")
	run(src, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "code")
	commit := run(src, "rev-parse", "HEAD")
	run(base, "clone", "-q", "--bare", src, filepath.Join(base, "repo.git"))
	// The remote belongs to nobody, as the test bed's git daemon serves it.
	if err := filepath.Walk(filepath.Join(base, "repo.git"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, CodeUser, CodeUser)
	}); err != nil {
		t.Fatal(err)
	}

	// The checkout's volume: root's, writable by all, with an earlier attempt's leftovers.
	dir := filepath.Join(base, "code")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".leftover"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(base, "closed") // the image's working directory, like /root
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}

	for attempt := 1; attempt <= 2; attempt++ { // the second: a restarted init container
		cmd := exec.Command("/bin/sh", "-c", codeScript)
		cmd.Dir = dir // the container's workingDir (InitContainers sets it to the path)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp",
			"KOLOTOC_CODE_REPOSITORY=file://" + filepath.Join(base, "repo.git"), "KOLOTOC_CODE_REF=main", "KOLOTOC_CODE_DIR=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: CodeUser, Gid: CodeUser}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("attempt %d: the clone failed as nobody: %v\n%s", attempt, err, out)
		}
		if !strings.Contains(string(out), "at "+commit+" in "+dir) {
			t.Errorf("attempt %d: the clone does not print its commit %s:\n%s", attempt, commit, out)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "train.py")); err != nil || string(b) != "print('hi')\n" {
			t.Errorf("attempt %d: train.py not checked out: %v", attempt, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".leftover")); !os.IsNotExist(err) {
		t.Errorf("an earlier attempt's file survived the clone: %v", err)
	}
}

// TestCodeCredentialsScopedToTheRepository: the clone's credential helper answers the
// repository's scheme and host only (git's credential.<url>.helper), not another host a redirect
// or a submodule names.
func TestCodeCredentialsScopedToTheRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not on PATH: the test runs git's own credential lookup (the README's requirements name git)")
	}
	// A fake git records the clone's arguments, then fails the script.
	bin := t.TempDir()
	args := filepath.Join(bin, "args")
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+args+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", codeScript)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "KOLOTOC_CODE_REPOSITORY=https://git.example.com/team/train.git",
		"KOLOTOC_CODE_REF=main", "KOLOTOC_CODE_DIR=" + cmd.Dir, "GIT_USERNAME=bot", "GIT_PASSWORD=s3cret-token"}
	_ = cmd.Run() // the fake git fails it
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	var helper string
	for _, a := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(a, "credential.") {
			helper = a
		}
	}
	if !strings.HasPrefix(helper, "credential.https://git.example.com.helper=") {
		t.Fatalf("credential helper %q, want it scoped to https://git.example.com", helper)
	}
	// The real git with that configuration: the password for the repository's host, nothing for another.
	for host, want := range map[string]bool{"git.example.com": true, "evil.example.net": false} {
		fill := exec.Command("git", "-c", helper, "credential", "fill")
		fill.Stdin = strings.NewReader("protocol=https\nhost=" + host + "\n\n")
		fill.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_USERNAME=bot", "GIT_PASSWORD=s3cret-token",
			"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GIT_CONFIG_NOSYSTEM=1"}
		out, _ := fill.CombinedOutput()
		if got := strings.Contains(string(out), "password=s3cret-token"); got != want {
			t.Errorf("credentials for %s: %v, want %v\n%s", host, got, want, out)
		}
	}
}
