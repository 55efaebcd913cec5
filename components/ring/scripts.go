package ring

import (
	"fmt"
	"strings"
)

// launcherWaitSeconds is how long the launcher waits for every tower to resolve and accept ssh
// before it fails (seconds): long enough for a GPU node to pull a multi-GB image.
const launcherWaitSeconds = 900

// Hostfile renders the MPI hostfile: one line per tower, `<pod>.<service>.<namespace>.svc slots=N`.
func Hostfile(towers, slots int, service, namespace string) string {
	var b strings.Builder
	for i := 0; i < towers; i++ {
		fmt.Fprintf(&b, "%s-%d.%s.%s.svc slots=%d\n", service, i, service, namespace, slots)
	}
	return b.String()
}

// sshdScript starts sshd on a tower with the derived key as the only authorized key.
const sshdScript = `#!/bin/bash
# Tower entrypoint: accept the launcher's ssh key, then run sshd in the foreground.
set -euo pipefail
mkdir -p /root/.ssh /run/sshd
chmod 700 /root/.ssh
cp /etc/kolotoc/ssh/authorized_keys /root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
cp /etc/kolotoc/ssh/id_ed25519 /root/.ssh/id_ed25519
chmod 600 /root/.ssh/id_ed25519
cp /etc/kolotoc/scripts/ssh_config /root/.ssh/config
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -D -e -p "${KOLOTOC_SSH_PORT}"
`

// launcherScript waits until every host of the hostfile resolves and accepts the ssh key (the most
// common MPI failure is a launcher that starts before its workers), writes the hostfile for mpirun
// and runs the configured command.
const launcherScript = `#!/bin/bash
set -euo pipefail
mkdir -p /root/.ssh
chmod 700 /root/.ssh
cp /etc/kolotoc/ssh/id_ed25519 /root/.ssh/id_ed25519
chmod 600 /root/.ssh/id_ed25519
cp /etc/kolotoc/scripts/ssh_config /root/.ssh/config
deadline=$((SECONDS + KOLOTOC_WAIT_SECONDS))
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
echo "launcher: all hosts up; running $*"
exec "$@"
`

// sshConfig lets mpirun reach every tower with the derived key on the configured port.
func sshConfig(port int) string {
	return fmt.Sprintf(`Host *
    Port %d
    User root
    IdentityFile /root/.ssh/id_ed25519
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
`, port)
}
