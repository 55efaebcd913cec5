package ring

import (
	"fmt"
	"strings"

	"kolotoc/components/meta"
)

// launcherWaitSeconds is how long the launcher waits for every tower to resolve and accept ssh
// before it fails (seconds) when Args.WaitSeconds is 0: long enough for a GPU node to pull a
// multi-GB image. The stack sets it to its await timeout (kolotoc:awaitTimeout).
const launcherWaitSeconds = 900

// Hostfile renders the MPI hostfile: one line per tower, `<pod>.<service>.<namespace>.svc slots=N`.
func Hostfile(towers, slots int, service, namespace string) string {
	var b strings.Builder
	for i := 0; i < towers; i++ {
		fmt.Fprintf(&b, "%s-%d.%s.%s.svc slots=%d\n", service, i, service, namespace, slots)
	}
	return b.String()
}

// sshHomeSetup, the start of the towers' and the launcher's scripts, puts the derived key and the
// ssh client's configuration in ~/.ssh of whichever user runs them (kolotoc:runAsUser): root, or
// a user whose image gives it a home directory.
const sshHomeSetup = `if ! mkdir -p "$HOME/.ssh" 2>/dev/null; then
  echo "${0##*/}: cannot create $HOME/.ssh as uid $(id -u): the image needs a writable home directory for that user (kolotoc:runAsUser)" >&2
  exit 1
fi
chmod 700 "$HOME/.ssh"
cp /etc/kolotoc/ssh/id_ed25519 "$HOME/.ssh/id_ed25519"
chmod 600 "$HOME/.ssh/id_ed25519"
cp /etc/kolotoc/scripts/ssh_config "$HOME/.ssh/config"
`

// sshdScript starts sshd on a tower with Kolotoc's configuration and the derived key as the only
// authorized key, as whichever user the tower runs as (kolotoc:runAsUser): root, or a user whose
// image gives it a home directory. The host key is made where sshd_config's HostKey says.
const sshdScript = `#!/bin/bash
# Tower entrypoint: accept the launcher's ssh key, then run sshd in the foreground.
set -euo pipefail
` + sshHomeSetup + `cp /etc/kolotoc/ssh/authorized_keys "$HOME/.ssh/authorized_keys"
chmod 600 "$HOME/.ssh/authorized_keys"
# Root's sshd chroots its privilege-separated child to /run/sshd; another user's has none.
[ "$(id -u)" != 0 ] || mkdir -p /run/sshd
hostkey=$(awk '$1 == "HostKey" { print $2 }' /etc/kolotoc/scripts/sshd_config)
[ -f "$hostkey" ] || ssh-keygen -q -t ed25519 -N '' -f "$hostkey"
exec /usr/sbin/sshd -D -e -f /etc/kolotoc/scripts/sshd_config -p "${KOLOTOC_SSH_PORT}"
`

// sshdRunDir is where a tower whose sshd is not root keeps its host key and pid file (an
// emptyDir): /etc/ssh and /run belong to root.
const sshdRunDir = "/run/kolotoc/sshd"

// sshdConfig is the towers' whole sshd configuration: the image's /etc/ssh/sshd_config is not
// read, so what a tower accepts does not depend on the image. The derived key is the only way in
// (no password, no keyboard-interactive, no host-based login, no empty passwords), and nothing
// but commands: no forwarding of agents, ports, X11 or tunnels. mpirun and horovodrun need no
// more than a command per connection. ChallengeResponseAuthentication is the name both old (the
// horovod image's OpenSSH 8.2) and new OpenSSH read. MaxStartups lets a launcher (and Open MPI's
// tree spawn) open many connections at once.
//
// As root (runAsUser 0), root logs in by key only, and PAM stays on for the session, as in the
// images' own configuration (with passwords off it authenticates nothing). As another user, sshd
// can let in only that user, never root; PAM needs root and is off; the host key lives in
// sshdRunDir.
//
// env, the fabric's environment (NCCL's on EFA), is set in every session (SetEnv, OpenSSH 7.8
// and later): the ranks mpirun starts over ssh are sessions, and get none of the pod's own.
func sshdConfig(runAsUser int, env map[string]string) string {
	who := `HostKey /etc/ssh/ssh_host_ed25519_key
AuthorizedKeysFile /root/.ssh/authorized_keys
AllowUsers root
PermitRootLogin prohibit-password
`
	pam := "yes"
	if runAsUser != 0 {
		who = fmt.Sprintf(`HostKey %[1]s/ssh_host_ed25519_key
PidFile %[1]s/sshd.pid
AuthorizedKeysFile .ssh/authorized_keys
PermitRootLogin no
`, sshdRunDir)
		pam = "no"
	}
	return `# Written by Kolotoc (components/ring); the port comes from -p.
` + who + `PubkeyAuthentication yes
PasswordAuthentication no
ChallengeResponseAuthentication no
HostbasedAuthentication no
PermitEmptyPasswords no
UsePAM ` + pam + `
StrictModes yes
AllowAgentForwarding no
AllowTcpForwarding no
AllowStreamLocalForwarding no
GatewayPorts no
X11Forwarding no
PermitTunnel no
PermitUserEnvironment no
PrintMotd no
MaxStartups 200:30:1000
LogLevel INFO
` + setEnv(env)
}

// setEnv is sshd_config's SetEnv line for env, sorted by name; "" for none. Values are the
// fabric's own (no spaces or quotes to escape).
func setEnv(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("SetEnv")
	for _, k := range meta.SortedKeys(env) {
		fmt.Fprintf(&b, " %s=%s", k, env[k])
	}
	return b.String() + "\n"
}

// launcherScript waits until every host of the hostfile resolves and accepts the ssh key (the most
// common MPI failure is a launcher that starts before its workers), writes the hostfile for mpirun
// and runs the configured command; with onSuccess release, a command that succeeds then scales
// the towers to zero.
const launcherScript = `#!/bin/bash
set -euo pipefail
` + sshHomeSetup + `deadline=$((SECONDS + KOLOTOC_WAIT_SECONDS))
while read -r host _; do
  [ -n "$host" ] || continue
  # -n: ssh must not read the loop's standard input, the rest of the hostfile.
  until getent hosts "$host" >/dev/null && ssh -n -o BatchMode=yes -o ConnectTimeout=5 "$host" true 2>/dev/null; do
    if (( SECONDS > deadline )); then
      echo "launcher: $host did not resolve or accept ssh on port ${KOLOTOC_SSH_PORT} within ${KOLOTOC_WAIT_SECONDS}s" >&2
      exit 1
    fi
    sleep 2
  done
  echo "launcher: $host is up"
done < /etc/kolotoc/scripts/hostfile
cp /etc/kolotoc/scripts/hostfile "${KOLOTOC_HOSTFILE}"
echo "launcher: all hosts up; running ${KOLOTOC_RUN:+run $KOLOTOC_RUN: }$*"
if [ "${KOLOTOC_ON_SUCCESS:-keep}" != release ]; then
  exec "$@"
fi
status=0
"$@" || status=$?
if [ "$status" = 0 ]; then
  # onSuccess release: the run is done, its towers go and their GPUs with them. A failure to
  # release leaves them running; the run itself succeeded, and a retry would run it again.
  echo "launcher: ${KOLOTOC_RUN:+run $KOLOTOC_RUN }succeeded; releasing the towers (onSuccess: release)"
  python3 /etc/kolotoc/scripts/release.py "$KOLOTOC_RELEASE" || echo "launcher: could not release the towers" >&2
fi
exit "$status"
`

// sshConfig lets mpirun reach every tower with the derived key on the configured port, as root
// (runAsUser 0) or as the user the towers run as: ssh's default, the launcher's own user.
func sshConfig(port, runAsUser int) string {
	user := "    User root\n"
	if runAsUser != 0 {
		user = ""
	}
	return fmt.Sprintf(`Host *
    Port %d
%s    IdentityFile ~/.ssh/id_ed25519
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
`, port, user)
}
