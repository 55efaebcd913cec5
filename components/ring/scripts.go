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
//
// sshd runs beside the script, not in its place: at SIGTERM (a drain, a Spot reclaim, a deleted
// pod) the script stops sshd's listener first, so that the launcher's next attempt waits for this
// tower's replacement instead of starting into a tower that is going (open sessions live on),
// then passes SIGTERM to the ranks (towerRanks) and waits, within the pod's grace period
// (towers.terminationGracePeriodSeconds), until they have ended: a rank writes its checkpoint
// then. Before, sshd was the container's first process, and its end took every rank with it by
// SIGKILL, with no time to save anything.
const sshdScript = `#!/bin/bash
# Tower entrypoint: accept the launcher's ssh key, run sshd; at SIGTERM, give the ranks their
# grace period to checkpoint.
set -euo pipefail
` + sshHomeSetup + `cp /etc/kolotoc/ssh/authorized_keys "$HOME/.ssh/authorized_keys"
chmod 600 "$HOME/.ssh/authorized_keys"
# Root's sshd chroots its privilege-separated child to /run/sshd; another user's has none.
[ "$(id -u)" != 0 ] || mkdir -p /run/sshd
hostkey=$(awk '$1 == "HostKey" { print $2 }' /etc/kolotoc/scripts/sshd_config)
[ -f "$hostkey" ] || ssh-keygen -q -t ed25519 -N '' -f "$hostkey"
` + towerRanks + `
stop() {
  trap - TERM INT
  echo "tower: SIGTERM: sshd takes no new connection; the ranks get SIGTERM and the grace period to checkpoint" >&2
  kill -TERM "$sshd" 2>/dev/null || true
  pids=$(ranks)
  # shellcheck disable=SC2086 # one pid a word
  [ -z "$pids" ] || kill -TERM $pids 2>/dev/null || true
  while [ -n "$(ranks)" ]; do sleep 0.2; done
  echo "tower: every rank has ended" >&2
  exit 0
}
trap stop TERM INT
/usr/sbin/sshd -D -e -f /etc/kolotoc/scripts/sshd_config -p "${KOLOTOC_SSH_PORT}" &
sshd=$!
wait "$sshd"
`

// towerRanks defines ranks(): the processes of the tower's training, which get SIGTERM when the
// tower is stopped: every process this script may signal but itself, the container's first
// process, sshd (listener and sessions), MPI's daemons and launchers (orted, prted, mpirun: they
// end with the ranks, and would SIGKILL them before their checkpoint if signalled first) and the
// shells between them and the ranks.
const towerRanks = `ranks() {
  local d pid comm
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" != 1 ] && [ "$pid" != $$ ] || continue
    { read -r comm < "$d/comm"; } 2>/dev/null || continue # it may be gone already
    case "$comm" in sshd|sshd-session|orted|prted|mpirun|mpiexec|orterun|prterun|bash|sh|dash|sleep) continue ;; esac
    kill -0 "$pid" 2>/dev/null && echo "$pid"
  done
  return 0
}`

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

// launcherScript runs the ring's run (the configured command, mpirun) in attempts: each waits
// until every host of the hostfile resolves and accepts the ssh key (the most common MPI failure
// is a launcher that starts before its workers, and a retry into a broken ring is no retry),
// writes the hostfile for mpirun and runs the command with KOLOTOC_ATTEMPT set. A failed attempt
// (a rank's process, a tower or its node lost) starts the next one over the whole ring, from the
// last checkpoint the program left in KOLOTOC_CHECKPOINT_DIR, until towers.maxRestarts restarts
// are spent; then the run ends failed with runFailedExit, which fails the Job at once
// (RenderLauncher's pod failure policy). The run's state (attempt, restarts and why, the last
// checkpoint's step, the phase) goes to the state ConfigMap, which the output runState prints,
// and survives the launcher's own pod: a replacement pod (an evicted launcher, a resumed suspend)
// takes the count up where it was. With onSuccess release, a run that succeeds then scales the
// towers to zero.
const launcherScript = `#!/bin/bash
set -euo pipefail
` + sshHomeSetup + `set +e
state() { # key=value …: record the run's state, for the runState output
  python3 /etc/kolotoc/scripts/runstate.py set "$@" || echo "launcher: could not record the run's state" >&2
}
latest_step() { # the step of the program's newest checkpoint, if it says (` + meta.LatestStepFile + `)
  { tr -dc 0-9 < "${KOLOTOC_CHECKPOINT_DIR}/` + meta.LatestStepFile + `"; } 2>/dev/null
}
watch_steps() { # the state follows the checkpoints while an attempt runs
  local last="" s
  while sleep 10; do
    s=$(latest_step)
    if [ "$s" != "$last" ]; then state checkpointStep="$s"; last=$s; fi
  done
}
wait_towers() {
  local deadline=$((SECONDS + KOLOTOC_WAIT_SECONDS)) host
  while read -r host _; do
    [ -n "$host" ] || continue
    # -n: ssh must not read the loop's standard input, the rest of the hostfile.
    until getent hosts "$host" >/dev/null && ssh -n -o BatchMode=yes -o ConnectTimeout=5 "$host" true 2>/dev/null; do
      # Queued, the towers wait for their admission (and their nodes) as long as the queue
      # takes: no deadline (KOLOTOC_QUEUED, meta.SetGang).
      if [ "${KOLOTOC_QUEUED:-false}" != true ] && (( SECONDS > deadline )); then
        echo "launcher: $host did not resolve or accept ssh on port ${KOLOTOC_SSH_PORT} within ${KOLOTOC_WAIT_SECONDS}s" >&2
        return 1
      fi
      sleep 2
    done
    echo "launcher: $host is up"
  done < /etc/kolotoc/scripts/hostfile
}
child="" stopping=""
on_term() { # the launcher's pod is going: the run gets SIGTERM (mpirun passes it to the ranks)
  stopping=1
  echo "launcher: SIGTERM: passing it to the run" >&2
  [ -z "$child" ] || kill -TERM "$child" 2>/dev/null
}
trap on_term TERM INT
mkdir -p "${KOLOTOC_CHECKPOINT_DIR}" 2>/dev/null || echo "launcher: cannot create ${KOLOTOC_CHECKPOINT_DIR}" >&2
attempt=0 restarts=0 reasons=""
eval "$(python3 /etc/kolotoc/scripts/runstate.py get)" # prev_*: this Job's state, if an earlier launcher pod of it ran
if [ -n "${prev_attempt:-}" ]; then
  attempt=$((prev_attempt + 1)) restarts=${prev_restarts:-0}
  reasons="${prev_reasons:+$prev_reasons; }attempt $prev_attempt: the launcher's pod ended (evicted, suspended or its node lost)"
  echo "launcher: this run's launcher ran before; attempt $attempt follows" >&2
fi
out=$(mktemp)
while :; do
  state job="${KOLOTOC_LAUNCHER_UID}" run="${KOLOTOC_RUN_ID}" attempt="$attempt" restarts="$restarts" \
    maxRestarts="${KOLOTOC_MAX_RESTARTS}" phase=waiting checkpointStep="$(latest_step)" reasons="$reasons"
  wait_towers
  waited=$?
  if [ -n "$stopping" ]; then
    echo "launcher: stopped while waiting for the towers; this Job's next launcher pod starts attempt $((attempt + 1))" >&2
    exit 143
  fi
  if [ "$waited" != 0 ]; then
    why="attempt $attempt: a tower did not take ssh within ${KOLOTOC_WAIT_SECONDS}s"
    state phase=failed reasons="${reasons:+$reasons; }$why"
    echo "launcher: run ${KOLOTOC_RUN_ID} failed: $why" | tee /dev/termination-log >&2
    exit ` + runFailedExitText + `
  fi
  cp /etc/kolotoc/scripts/hostfile "${KOLOTOC_HOSTFILE}"
  export ` + meta.AttemptEnv + `=$attempt
  echo "launcher: all hosts up; running ${KOLOTOC_RUN:+run $KOLOTOC_RUN: }attempt $attempt (restarts $restarts of ${KOLOTOC_MAX_RESTARTS}, checkpoints in ${KOLOTOC_CHECKPOINT_DIR}): $*"
  state phase=running
  watch_steps &
  watcher=$!
  # The run's output goes to the launcher's log and to $out, whose lines say why it failed; tee
  # is waited for after the run, so $out is complete before it is read (under load, tee in a
  # process substitution of the run itself had not written the last lines yet).
  exec {logfd}> >(tee "$out")
  teepid=$!
  "$@" >&"$logfd" 2>&1 &
  child=$!
  exec {logfd}>&-
  while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null || break # else a trapped signal ended the wait
  done
  child=""
  kill "$watcher" 2>/dev/null
  wait "$teepid" 2>/dev/null
  step=$(latest_step)
  if [ -n "$stopping" ]; then
    echo "launcher: stopped during attempt $attempt; this Job's next launcher pod starts attempt $((attempt + 1))" >&2
    exit 143
  fi
  if [ "$status" = 0 ]; then
    state phase=succeeded checkpointStep="$step"
    echo "launcher: ${KOLOTOC_RUN:+run $KOLOTOC_RUN }succeeded at attempt $attempt ($restarts restarts)"
    if [ "${KOLOTOC_ON_SUCCESS:-keep}" = release ]; then
      # onSuccess release: the run is done, its towers go and their GPUs with them. A failure to
      # release leaves them running; the run itself succeeded, and a retry would run it again.
      echo "launcher: ${KOLOTOC_RUN:+run $KOLOTOC_RUN }succeeded; releasing the towers (onSuccess: release)"
      python3 /etc/kolotoc/scripts/release.py "$KOLOTOC_RELEASE" || echo "launcher: could not release the towers" >&2
    fi
    exit 0
  fi
  # What Open MPI said of the failure: the rank that ended, and how.
  detail=$(grep -m1 -E 'noticed that process rank|exited on signal|non-zero status|lost|unexpectedly' "$out" | tr -s ' \t' ' ' | cut -c1-160)
  why="attempt $attempt: exit $status${detail:+ ($detail)}"
  reasons="${reasons:+$reasons; }$why"
  if (( restarts >= KOLOTOC_MAX_RESTARTS )); then
    state phase=failed checkpointStep="$step" reasons="$reasons"
    echo "launcher: run ${KOLOTOC_RUN_ID} failed after $((attempt + 1)) attempts ($restarts restarts, towers.maxRestarts ${KOLOTOC_MAX_RESTARTS}): $reasons" | tee /dev/termination-log >&2
    exit ` + runFailedExitText + `
  fi
  restarts=$((restarts + 1)) attempt=$((attempt + 1))
  echo "launcher: $why; restart $restarts of ${KOLOTOC_MAX_RESTARTS}: attempt $attempt resumes from the last checkpoint (step ${step:-none}) once every tower takes ssh again" >&2
done
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

// runFailedExit is the launcher's exit code when its run has failed for good (towers.maxRestarts
// spent, or the ring did not come back): the Job fails at once on it (RenderLauncher), instead of
// starting its whole run again in a new pod.
const (
	runFailedExit     = 3
	runFailedExitText = "3"
)

// runStateScript records and reads the run's state in the state ConfigMap (StateName) through
// the API server, with the launcher's own token, which may get and patch that ConfigMap and
// nothing else (RenderStateRole); python3's standard library only, as meta.ReleaseScript.
//
//	runstate.py get          shell assignments prev_attempt=…, prev_restarts=…, prev_reasons=…
//	                         when the state is this Job's (an earlier pod of it ran), else nothing
//	runstate.py set k=v …    merges the keys into the state, with the time of the change
//
// Without a token (none mounted) it does nothing; a failure to record is reported, never fatal.
const runStateScript = `"""Kolotoc: the towers' run state, in the ConfigMap the runState output prints."""
import datetime
import json
import os
import shlex
import ssl
import sys
import time
import urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def request(method, body=None):
    ns = open(SA + "/namespace").read().strip()
    token = open(SA + "/token").read().strip()
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    if ":" in host:
        host = "[" + host + "]"
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    url = f"https://{host}:{port}/api/v1/namespaces/{ns}/configmaps/{os.environ['KOLOTOC_STATE']}"
    if method == "PATCH":
        url += "?fieldManager=kolotoc-launcher"
    tls = ssl.create_default_context(cafile=SA + "/ca.crt")
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/merge-patch+json"}
    data = json.dumps(body).encode() if body is not None else None
    for attempt in range(5):
        try:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            return json.loads(urllib.request.urlopen(req, context=tls, timeout=10).read())
        except Exception as e:  # noqa: BLE001 - retried, then reported
            err = e
            time.sleep(1)
    raise SystemExit(f"runstate: {method} configmap {os.environ['KOLOTOC_STATE']}: {err}")


def main(args):
    if not os.path.exists(SA + "/token"):
        return 0
    if args[:1] == ["get"]:
        data = request("GET").get("data") or {}
        if data.get("job") and data.get("job") == os.environ.get("KOLOTOC_LAUNCHER_UID"):
            for key in ("attempt", "restarts", "reasons"):
                print(f"prev_{key}={shlex.quote(data.get(key, ''))}")
        return 0
    if args[:1] == ["set"]:
        data = dict(a.split("=", 1) for a in args[1:])
        data["updated"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        request("PATCH", {"data": data})
        return 0
    print("usage: runstate.py get | set key=value ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
`
