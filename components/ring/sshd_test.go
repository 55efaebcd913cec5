package ring

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The towers' sshd configuration, checked by the real OpenSSH server (Debian's openssh-server,
// installed by testbed/node/node.sh packages with the test bed's other packages): the configuration
// each tower runs is valid, and a session on a tower gets the fabric's environment (sshd_config(5),
// SetEnv), which is how mpirun's and horovodrun's ranks get NCCL's settings. Only loopback is used.

// sshdBinary is Debian's sshd, or the test fails saying how to get it.
func sshdBinary(t *testing.T) string {
	t.Helper()
	const sshd = "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("no %s: run `testbed/node/node.sh packages` (make unit does) to install openssh-server", sshd)
	}
	return sshd
}

// TestSSHDConfigValid: sshd -t accepts the configuration of root's and a user's towers, with and
// without a fabric environment.
func TestSSHDConfigValid(t *testing.T) {
	sshd := sshdBinary(t)
	efa := map[string]string{"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "FI_EFA_USE_DEVICE_RDMA": "1"}
	for _, tc := range []struct {
		name string
		uid  int
		env  map[string]string
	}{{"root", 0, nil}, {"root with EFA", 0, efa}, {"user with EFA", 1000, efa}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := hostKey(t, dir)
			conf := writeConfig(t, dir, sshdConfig(tc.uid, tc.env), key)
			// Root's privilege-separated child chroots here (the tower script makes it too).
			if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
				t.Fatal(err)
			}
			// -t: check the configuration and keys, then exit.
			out, err := exec.Command(sshd, "-t", "-f", conf).CombinedOutput()
			if err != nil {
				t.Fatalf("sshd -t refuses the towers' configuration: %v\n%s", err, out)
			}
		})
	}
}

// TestSSHDSessionGetsFabricEnv: a command run over ssh on a tower (as mpirun starts each rank)
// sees the fabric's environment, and one on a tower without a fabric does not.
func TestSSHDSessionGetsFabricEnv(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("runs sshd as root, as a tower does (make test runs as root)")
	}
	sshd := sshdBinary(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"EFA", map[string]string{"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "FI_EFA_USE_DEVICE_RDMA": "1"},
			[]string{"FI_PROVIDER=efa", "FI_EFA_FORK_SAFE=1", "FI_EFA_USE_DEVICE_RDMA=1"}},
		{"no fabric", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := hostKey(t, dir)
			client := filepath.Join(dir, "id_ed25519")
			if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", client).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen: %v\n%s", err, out)
			}
			conf := writeConfig(t, dir, sshdConfig(0, tc.env), key)
			port := freePort(t)
			// Root's privilege-separated child chroots here (the tower script makes it too).
			if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
				t.Fatal(err)
			}
			// The tower's own configuration, with only what places files elsewhere on this
			// machine overridden on the command line (command-line options win): the authorized
			// keys and the pid file under the test's directory, whose /tmp parent StrictModes
			// would refuse; and the listener on loopback.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, sshd, "-D", "-e", "-f", conf, "-p", fmt.Sprint(port),
				"-o", "ListenAddress=127.0.0.1", "-o", "AuthorizedKeysFile="+client+".pub",
				"-o", "PidFile="+filepath.Join(dir, "sshd.pid"), "-o", "StrictModes=no")
			var log bytes.Buffer
			srv.Stdout, srv.Stderr = &log, &log
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
			waitListening(t, port, &log)

			out, err := exec.CommandContext(ctx, "ssh", "-n", "-F", "/dev/null", "-i", client, "-p", fmt.Sprint(port),
				"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
				"root@127.0.0.1", "env").CombinedOutput()
			if err != nil {
				t.Fatalf("ssh to the tower's sshd: %v\n%s\nsshd: %s", err, out, log.String())
			}
			env := strings.Split(string(out), "\n")
			for _, w := range tc.want {
				if !slices.Contains(env, w) {
					t.Errorf("the session lacks %s; its environment:\n%s", w, out)
				}
			}
			if tc.env == nil && strings.Contains(string(out), "FI_PROVIDER") {
				t.Errorf("a session without a fabric has FI_PROVIDER:\n%s", out)
			}
		})
	}
}

// writeConfig writes a tower's sshd_config into dir with its host key at key: the tower's path
// (under /etc/ssh, or the run directory) is the container's, not this machine's. A HostKey given
// with -o would be added to the file's, not replace it.
func writeConfig(t *testing.T, dir, conf, key string) string {
	t.Helper()
	lines := strings.Split(conf, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "HostKey ") {
			lines[i] = "HostKey " + key
		}
	}
	path := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hostKey(t *testing.T, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "ssh_host_ed25519_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	return key
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(t *testing.T, port int, log *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sshd did not listen on 127.0.0.1:%d within 10s:\n%s", port, log.String())
}
