# shellcheck shell=bash disable=SC2034
# The helpers the test bed's scripts share (testbed/*/*.sh). Sourced, never run: a script sets
# its log tag, then sources this file beside it,
#
#   log_tag=cluster
#   # shellcheck source=testbed/lib.sh
#   . "$(dirname "$0")/../lib.sh"
#
# which sets
#   root        the checkout (Pulumi.yaml, the Makefile)
#   testbed     $root/testbed
#   bin_dir     $root/.kolotoc/bin: links to the built tools (testbed/tools/tools.sh), first on PATH
#   cache_dir   the per-user cache, ${KOLOTOC_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kolotoc}:
#               the real node's images and containerd roots (the tools have their own,
#               testbed/tools/tools.sh)
#   kubeconfig  the local cluster's kubeconfig: ${KOLOTOC_KUBECONFIG:-.kolotoc/kubeconfig}
# and defines log, die, now_ms, secs, median, tool, kubectl, wait_for, pid_alive, stop_pid,
# path_without, and cluster_env (the local cluster's names and addresses, for the scripts that
# drive it). (SC2034 is off: the variables set here are the sourcing scripts'.)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
testbed=$root/testbed
bin_dir=$root/.kolotoc/bin
cache_dir=${KOLOTOC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kolotoc}
# A cluster other than the default (make test's e2e) has a kubeconfig of its own: every script
# that talks to the cluster goes through this one (testbed/testbed_test.go checks).
kubeconfig=${KOLOTOC_KUBECONFIG:-$root/.kolotoc/kubeconfig}

# log MESSAGE...: a line on stderr, tagged with the script's $log_tag.
log() { printf '[%s] %s\n' "${log_tag:-testbed}" "$*" >&2; }
die() { log "$*"; exit 1; }

# now_ms: wall clock in milliseconds; secs MS: those milliseconds as seconds, one decimal.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%01d' $(($1 / 1000)) $((($1 % 1000) / 100)); }

# median: the median of the numbers on stdin, one a line (the mean of the middle two when even).
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# tool NAME: absolute path of a built tool, symlinks resolved (kwokctl wants plain paths). Only
# ever used in a plain assignment, so that a missing tool stops the script under set -e.
tool() {
  local path
  path=$(readlink -f "$bin_dir/$1" 2>/dev/null || true)
  if [ -z "$path" ] || [ ! -x "$path" ]; then
    die "$1 is missing from $bin_dir: run 'make tools' (testbed/tools/tools.sh) first"
  fi
  printf '%s\n' "$path"
}

# kubectl ARG...: kubectl on the local cluster's kubeconfig; $kubectl_bin when the script resolved
# it (tool kubectl), else the one testbed/tools/tools.sh links.
kubectl() { "${kubectl_bin:-$bin_dir/kubectl}" --kubeconfig "$kubeconfig" "$@"; }

# wait_for SECONDS WHAT COMMAND...: polls COMMAND (its output discarded) every 0.2 s until it
# succeeds; dies after SECONDS naming WHAT, and the logs directory $logs when the script set it.
wait_for() {
  local seconds=$1 what=$2; shift 2
  local limit=$(($(now_ms) + seconds * 1000))
  until "$@" >/dev/null 2>&1; do
    [ "$(now_ms)" -lt "$limit" ] || die "timed out after $seconds s waiting for $what${logs:+ (logs: $logs)}"
    sleep 0.2
  done
}

# pid_alive FILE: the process whose pid FILE holds runs. A zombie does not count: a daemon's
# parent is gone, and whatever adopted it may be slow to reap it.
pid_alive() {
  local p
  p=$(cat "$1" 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null \
    && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null
}

# stop_pid FILE SECONDS: SIGTERM to that process when it runs, then waits (SECONDS at most) until
# it is gone; the pid file goes.
stop_pid() {
  local file=$1 i
  if pid_alive "$file"; then
    kill -TERM "$(cat "$file")" 2>/dev/null || true
    for ((i = 0; i < $2 * 10; i++)); do pid_alive "$file" || break; sleep 0.1; done
  fi
  rm -f "$file"
}

# path_without DIR: $PATH with DIR taken out.
path_without() { printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$1" | paste -sd: -; }

# cluster_env: the local cluster's names (KOLOTOC_CLUSTER, default kolotoc) and its addresses
# (testbed/cluster/local.env: NODE_IP, OUTSIDE_IP, POD_SUBNET, SERVICE_CIDR).
#   name         the cluster's name
#   netns        its network namespace, kolotoc-<name>, at netns_path
#   KWOK_WORKDIR kwokctl's files (exported: kwokctl reads it), .kolotoc/kwok
#   cluster_dir  the cluster's own directory under it
cluster_env() {
  name=${KOLOTOC_CLUSTER:-kolotoc}
  netns=kolotoc-$name
  netns_path=/run/netns/$netns
  export KWOK_WORKDIR=$root/.kolotoc/kwok
  cluster_dir=$KWOK_WORKDIR/clusters/$name
  # shellcheck source=testbed/cluster/local.env
  . "$testbed/cluster/local.env"
}
