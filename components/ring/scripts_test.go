package ring

import (
	"fmt"
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
	l, o, _, err := runLauncherWith(t, launcherRun{hosts: hosts, maxRestarts: 3}, command...)
	return l, o, err
}

// launcherRun is what a test launcher meets: the hosts, towers.maxRestarts, an earlier pod's
// state (shell assignments runstate.py get would print), and sshDown: how many ssh calls to a
// host fail after each failed attempt (its tower is being replaced).
type launcherRun struct {
	hosts       []string
	maxRestarts int
	prevState   string
	sshDown     map[string]int
	// downAtStart: how many ssh calls to a host fail before the first attempt (its tower not
	// admitted yet); waitSeconds: KOLOTOC_WAIT_SECONDS (default 5); queued: KOLOTOC_QUEUED=true.
	downAtStart map[string]int
	waitSeconds string
	queued      bool
}

// runLauncherWith runs the launcher script with stand-ins for ssh, getent and the run's state
// (python3 runstate.py: each `set` is appended to the returned state log, one line a call). The
// command runs in the test's directory, where it may leave files; $DIR names it.
func runLauncherWith(t *testing.T, r launcherRun, command ...string) (log, out, state string, err error) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"etc/kolotoc/scripts", "etc/kolotoc/ssh", "bin", "ckpt"} {
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
	for _, h := range r.hosts {
		hostfile.WriteString(h + " slots=1\n")
	}
	write("etc/kolotoc/scripts/hostfile", hostfile.String(), 0o644)
	write("etc/kolotoc/scripts/ssh_config", sshConfig(22, 0), 0o644)
	write("etc/kolotoc/ssh/id_ed25519", "key\n", 0o600)
	calls := filepath.Join(dir, "calls.log")
	// ssh: a host listed in down-<host> (a count) fails that many more calls.
	write("bin/ssh", `#!/bin/bash
[[ " $* " == *' -n '* ]] || cat >/dev/null
host=${@: -2:1}
echo "ssh $*" >>`+calls+`
f=`+dir+`/down-$host
if [ -s "$f" ] && [ "$(cat "$f")" -gt 0 ]; then echo $(( $(cat "$f") - 1 )) >"$f"; echo "ssh $host refused" >>`+calls+`; exit 255; fi
`, 0o755)
	write("bin/getent", "#!/bin/bash\necho \"getent $*\" >>"+calls+"\necho \"10.0.0.1 $2\"\n", 0o755)
	write("bin/sleep", "#!/bin/bash\n", 0o755) // the waits between ssh tries, at once
	// A tee that starts late, as on a loaded machine: the launcher must wait for it before it
	// reads what the run said (the reason of a failed attempt).
	write("bin/tee", "#!/bin/bash\n/bin/sleep 0.3\nexec /usr/bin/tee \"$@\"\n", 0o755)
	stateLog := filepath.Join(dir, "state.log")
	write("prev-state", r.prevState, 0o644)
	write("bin/python3", `#!/bin/bash
# python3 runstate.py get|set …: the run's state, kept in files
shift
case "$1" in
  get) cat `+dir+`/prev-state ;;
  set) shift; echo "$*" >>`+stateLog+` ;;
esac
`, 0o755)
	// After each failed attempt, the hosts in sshDown refuse ssh that many times.
	var down strings.Builder
	for h, n := range r.sshDown {
		fmt.Fprintf(&down, "echo %d >%s/down-%s\n", n, dir, h)
	}
	script := strings.NewReplacer("/etc/kolotoc/", dir+"/etc/kolotoc/", "/root/", dir+"/root/",
		"/dev/termination-log", dir+"/termination-log").Replace(launcherScript)
	if down.Len() > 0 {
		script = strings.Replace(script, "  restarts=$((restarts + 1)) attempt=$((attempt + 1))\n",
			"  restarts=$((restarts + 1)) attempt=$((attempt + 1))\n"+down.String(), 1)
	}
	write("launcher.sh", script, 0o755)
	for h, n := range r.downAtStart {
		write("down-"+h, fmt.Sprint(n), 0o644)
	}
	wait := r.waitSeconds
	if wait == "" {
		wait = "5"
	}

	cmd := exec.Command("bash", append([]string{filepath.Join(dir, "launcher.sh")}, command...)...)
	cmd.Env = []string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin", "DIR=" + dir, "CALLS=" + calls,
		"HOME=" + filepath.Join(dir, "home"), "KOLOTOC_WAIT_SECONDS=" + wait, "KOLOTOC_QUEUED=" + fmt.Sprint(r.queued), "KOLOTOC_SSH_PORT=22", "KOLOTOC_HOSTFILE=" + filepath.Join(dir, "hostfile.out"),
		"KOLOTOC_MAX_RESTARTS=" + fmt.Sprint(r.maxRestarts), "KOLOTOC_RUN_ID=r1", "KOLOTOC_LAUNCHER_UID=uid-1",
		"KOLOTOC_CHECKPOINT_DIR=" + filepath.Join(dir, "ckpt"),
	}
	b, err := cmd.CombinedOutput()
	l, _ := os.ReadFile(calls)
	st, _ := os.ReadFile(stateLog)
	return string(l), string(b), string(st), err
}

// exitCode is a finished command's exit code (0 when err is nil).
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("not an exit: %v", err)
	}
	return ee.ExitCode()
}

// A failed attempt is started again over the whole ring with the next KOLOTOC_ATTEMPT, each time
// once every tower takes ssh again: here tower-1 refuses ssh twice after each failure (its pod
// being replaced), and attempt N+1 starts only after it took ssh. The run that then succeeds ends
// the launcher with 0, its state succeeded. The old launcher ran the command once (exec).
func TestLauncherRestartsOnceEveryTowerTakesSSH(t *testing.T) {
	hosts := []string{"tower-0.tower.ns.svc", "tower-1.tower.ns.svc"}
	// The command fails in attempts 0 and 1, succeeds in 2; it writes the step of its checkpoint.
	calls, out, state, err := runLauncherWith(t, launcherRun{hosts: hosts, maxRestarts: 3, sshDown: map[string]int{hosts[1]: 2}},
		"bash", "-c", `echo "run attempt $KOLOTOC_ATTEMPT" >>"$CALLS"; echo $((KOLOTOC_ATTEMPT * 50 + 50)) >"$KOLOTOC_CHECKPOINT_DIR/latest-step"; [ "$KOLOTOC_ATTEMPT" = 2 ] || exit 9`)
	if err != nil {
		t.Fatalf("the launcher failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(calls), "\n")
	var runs []int
	for i, l := range lines {
		if n, ok := strings.CutPrefix(l, "run attempt "); ok {
			runs = append(runs, i)
			// Before each attempt: the last ssh to tower-1 succeeded.
			for j := i - 1; j >= 0; j-- {
				if strings.HasSuffix(lines[j], hosts[1]+" true") {
					if j+1 < len(lines) && lines[j+1] == "ssh "+hosts[1]+" refused" {
						t.Errorf("attempt %s started after tower-1 refused ssh:\n%s", n, calls)
					}
					break
				}
			}
		}
	}
	if len(runs) != 3 {
		t.Fatalf("want attempts 0, 1, 2; calls:\n%s\noutput:\n%s", calls, out)
	}
	if strings.Count(calls, "ssh "+hosts[1]+" refused") != 4 {
		t.Errorf("tower-1 should have refused ssh twice after each of the two failures:\n%s", calls)
	}
	for _, want := range []string{"restart 1 of 3: attempt 1 resumes from the last checkpoint (step 50)", "restart 2 of 3", "succeeded at attempt 2 (2 restarts)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"attempt=0 restarts=0 maxRestarts=3 phase=waiting", "attempt=2 restarts=2", "phase=succeeded checkpointStep=150"} {
		if !strings.Contains(state, want) {
			t.Errorf("state lacks %q:\n%s", want, state)
		}
	}
}

// Past towers.maxRestarts the run ends failed: the launcher exits runFailedExit (the Job's pod
// failure policy fails the Job on it, no new pod from attempt 0), having recorded why each
// attempt failed.
func TestLauncherStopsAtTheLimit(t *testing.T) {
	calls, out, state, err := runLauncherWith(t, launcherRun{hosts: []string{"tower-0.tower.ns.svc"}, maxRestarts: 1},
		"bash", "-c", `echo "run attempt $KOLOTOC_ATTEMPT" >>"$CALLS"; echo "mpirun noticed that process rank 1 with PID 0 on node tower-1 exited on signal 9 (Killed)."; exit 7`)
	if code := exitCode(t, err); code != runFailedExit {
		t.Fatalf("exit %d, want %d\n%s", code, runFailedExit, out)
	}
	if n := strings.Count(calls, "run attempt "); n != 2 {
		t.Errorf("%d attempts with maxRestarts 1, want 2:\n%s", n, calls)
	}
	last := state[strings.LastIndex(strings.TrimSpace(state), "\n")+1:]
	for _, want := range []string{"phase=failed", "attempt 0: exit 7 (mpirun noticed that process rank 1", "; attempt 1: exit 7"} {
		if !strings.Contains(last, want) {
			t.Errorf("the final state lacks %q:\n%s", want, state)
		}
	}
	if !strings.Contains(out, "failed after 2 attempts (1 restarts, towers.maxRestarts 1)") {
		t.Errorf("output:\n%s", out)
	}
}

// A new pod of the same launcher Job (the first evicted, its node lost, a suspend resumed) goes on
// with the next attempt and the restarts so far, not from attempt 0.
func TestLauncherGoesOnFromAnEarlierPod(t *testing.T) {
	calls, out, state, err := runLauncherWith(t, launcherRun{hosts: []string{"tower-0.tower.ns.svc"}, maxRestarts: 3,
		prevState: "prev_attempt=1\nprev_restarts=1\nprev_reasons='attempt 0: exit 1'\n"},
		"bash", "-c", `echo "run attempt $KOLOTOC_ATTEMPT" >>"$CALLS"`)
	if err != nil {
		t.Fatalf("the launcher failed: %v\n%s", err, out)
	}
	if !strings.Contains(calls, "run attempt 2") || strings.Contains(calls, "run attempt 0") {
		t.Errorf("want attempt 2 only:\n%s", calls)
	}
	if !strings.Contains(state, "attempt=2 restarts=1") || !strings.Contains(state, "attempt 1: the launcher's pod ended") {
		t.Errorf("state:\n%s", state)
	}
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

// A queued ring's launcher waits for its towers' admission without a deadline: a tower that
// refuses ssh past KOLOTOC_WAIT_SECONDS (here already past: -1) fails an unqueued run at once,
// while the queued run waits until it takes ssh, then runs.
func TestQueuedLauncherWaitsWithoutDeadline(t *testing.T) {
	hosts := []string{"tower-0.tower.ns.svc", "tower-1.tower.ns.svc"}
	for _, queued := range []bool{false, true} {
		calls, out, _, err := runLauncherWith(t, launcherRun{hosts: hosts, downAtStart: map[string]int{hosts[1]: 6}, waitSeconds: "-1", queued: queued},
			"bash", "-c", `echo "run attempt $KOLOTOC_ATTEMPT" >>"$CALLS"`)
		ran := strings.Contains(calls, "run attempt 0")
		refused := strings.Count(calls, "ssh "+hosts[1]+" refused")
		switch {
		case queued && (err != nil || !ran || refused != 6):
			t.Errorf("queued: exit %v, ran %v after %d refusals, want a run after all 6:\n%s\n%s", err, ran, refused, calls, out)
		case !queued && (exitCode(t, err) != runFailedExit || ran || !strings.Contains(out, "did not resolve or accept ssh")):
			t.Errorf("unqueued: exit %v, ran %v, want the run failed (%d) on the deadline:\n%s", err, ran, runFailedExit, out)
		}
	}
}
