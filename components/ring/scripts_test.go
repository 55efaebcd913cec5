package ring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runLauncher runs the launcher script as the launcher pod would, with its absolute paths moved
// under a temporary directory, and `ssh` and `getent` replaced by stand-ins that log each call.
// The ssh stand-in reads its standard input to the end, as the real ssh client does (it forwards
// stdin to the remote command) unless told -n.
func runLauncher(t *testing.T, hosts []string, command ...string) (log string, out string, err error) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"etc/kolotoc/scripts", "etc/kolotoc/ssh", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	var hostfile strings.Builder
	for _, h := range hosts {
		hostfile.WriteString(h + " slots=1\n")
	}
	write("etc/kolotoc/scripts/hostfile", hostfile.String(), 0o644)
	write("etc/kolotoc/scripts/ssh_config", sshConfig(22, 0), 0o644)
	write("etc/kolotoc/ssh/id_ed25519", "key\n", 0o600)
	calls := filepath.Join(dir, "calls.log")
	write("bin/ssh", "#!/bin/bash\n[[ \" $* \" == *' -n '* ]] || cat >/dev/null\necho \"ssh $*\" >>"+calls+"\n", 0o755)
	write("bin/getent", "#!/bin/bash\necho \"getent $*\" >>"+calls+"\necho \"10.0.0.1 $2\"\n", 0o755)
	script := strings.NewReplacer("/etc/kolotoc/", dir+"/etc/kolotoc/", "/root/", dir+"/root/").Replace(launcherScript)
	write("launcher.sh", script, 0o755)

	cmd := exec.Command("bash", append([]string{filepath.Join(dir, "launcher.sh")}, command...)...)
	cmd.Env = []string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin",
		"HOME=" + filepath.Join(dir, "home"), "KOLOTOC_WAIT_SECONDS=5", "KOLOTOC_SSH_PORT=22", "KOLOTOC_HOSTFILE=" + filepath.Join(dir, "hostfile.out"),
	}
	b, err := cmd.CombinedOutput()
	l, _ := os.ReadFile(calls)
	return string(l), string(b), err
}

// The launcher must reach every tower before it runs mpirun. Without `ssh -n`, the first ssh
// swallowed the rest of the hostfile from the loop's standard input: only the first tower was
// ever checked, and mpirun started while the others were still coming up.
func TestLauncherWaitsForEveryTower(t *testing.T) {
	hosts := []string{"tower-0.tower.ns.svc", "tower-1.tower.ns.svc", "tower-2.tower.ns.svc"}
	calls, out, err := runLauncher(t, hosts, "true")
	if err != nil {
		t.Fatalf("launcher failed: %v\n%s", err, out)
	}
	for _, h := range hosts {
		if !strings.Contains(calls, "getent hosts "+h) || !strings.Contains(out, "launcher: "+h+" is up") {
			t.Errorf("the launcher did not check %s before running the command; calls:\n%s\noutput:\n%s", h, calls, out)
		}
		var sshed bool
		for _, l := range strings.Split(calls, "\n") {
			sshed = sshed || (strings.HasPrefix(l, "ssh ") && strings.HasSuffix(l, " "+h+" true"))
		}
		if !sshed {
			t.Errorf("the launcher did not ssh to %s; calls:\n%s", h, calls)
		}
	}
}

// TestSSHDConfigFollowsTheUser: as root, root logs in by key alone, with PAM for the session; as
// another user (kolotoc:runAsUser) sshd cannot let root in, needs no PAM (which needs root), and
// keeps its host key and pid file in its own directory, since /etc/ssh and /run are root's. The
// ssh client logs in as root only when the towers run as root.
func TestSSHDConfigFollowsTheUser(t *testing.T) {
	lines := func(s string) map[string]string {
		out := map[string]string{}
		for _, l := range strings.Split(s, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), " "); ok && !strings.HasPrefix(k, "#") {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		uid  int
		want map[string]string
		none []string
	}{
		{0, map[string]string{"PermitRootLogin": "prohibit-password", "AllowUsers": "root", "UsePAM": "yes",
			"HostKey": "/etc/ssh/ssh_host_ed25519_key", "AuthorizedKeysFile": "/root/.ssh/authorized_keys"}, []string{"PidFile"}},
		{1000, map[string]string{"PermitRootLogin": "no", "UsePAM": "no", "HostKey": sshdRunDir + "/ssh_host_ed25519_key",
			"PidFile": sshdRunDir + "/sshd.pid", "AuthorizedKeysFile": ".ssh/authorized_keys"}, []string{"AllowUsers"}},
	} {
		got := lines(sshdConfig(tc.uid, nil))
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("runAsUser %d: %s %q, want %q", tc.uid, k, got[k], v)
			}
		}
		for _, k := range tc.none {
			if _, ok := got[k]; ok {
				t.Errorf("runAsUser %d: %s set", tc.uid, k)
			}
		}
		for k, v := range map[string]string{"PasswordAuthentication": "no", "ChallengeResponseAuthentication": "no",
			"AllowTcpForwarding": "no", "PermitTunnel": "no", "StrictModes": "yes"} {
			if got[k] != v {
				t.Errorf("runAsUser %d: %s %q, want %q", tc.uid, k, got[k], v)
			}
		}
		client := sshConfig(2222, tc.uid)
		if hasRoot := strings.Contains(client, "User root"); hasRoot != (tc.uid == 0) {
			t.Errorf("runAsUser %d: ssh_config says User root: %v\n%s", tc.uid, hasRoot, client)
		}
	}
}
