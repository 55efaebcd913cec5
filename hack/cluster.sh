#!/usr/bin/env bash
# The test bed's local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (playing the kubelets), started as plain processes by
# `kwokctl --runtime binary`, all listening on 127.0.0.1 only.
#
#   hack/cluster.sh up          start the cluster, or reuse it when it already runs; wait until the
#                               API server is ready and the default ServiceAccount exists; write
#                               the kubeconfig
#   hack/cluster.sh stop        stop its processes, keep its data (`up` starts it again)
#   hack/cluster.sh down        delete the cluster: its processes, listeners and files
#   hack/cluster.sh status      say whether it runs; exit 0 when it serves, 1 when it is stopped,
#                               3 when there is no such cluster
#   hack/cluster.sh kubeconfig  print the kubeconfig's path (rewritten from the running cluster)
#   hack/cluster.sh with CMD... run CMD with the cluster up, then put the cluster back as it was
#                               (left running, stopped, or deleted); exit with CMD's status
#
# Environment:
#   KOLOTOC_CLUSTER     cluster name (default kolotoc)
#   KOLOTOC_KUBECONFIG  where the kubeconfig is written (default .kolotoc/kubeconfig)
#
# Binaries come from .kolotoc/bin (hack/tools.sh). The cluster's files live under .kolotoc/kwok
# (KWOK_WORKDIR) and .kolotoc/kube-cache; nothing goes to ~/.kwok or ~/.kube. The kwokctl
# configuration, including the stage that gives simulated GPU nodes their capacity, is
# hack/kwokctl.yaml.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=$root/.kolotoc/bin
config=$root/hack/kwokctl.yaml
name=${KOLOTOC_CLUSTER:-kolotoc}
kubeconfig=${KOLOTOC_KUBECONFIG:-$root/.kolotoc/kubeconfig}
export KWOK_WORKDIR=$root/.kolotoc/kwok
# kubectl's discovery cache (default ~/.kube/cache), for ours and the one kwokctl runs.
export KUBECACHEDIR=${KUBECACHEDIR:-$root/.kolotoc/kube-cache}
cluster_dir=$KWOK_WORKDIR/clusters/$name
# What the running cluster was created from; a change means `down` and `up` to apply it.
stamp=$KWOK_WORKDIR/$name.created-from
kwokctl_log=$KWOK_WORKDIR/$name.kwokctl.log

# How long to wait for the API server and for the default ServiceAccount (seconds).
READY_TIMEOUT=120

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# tool NAME: absolute path of a built tool, symlinks resolved (kwokctl wants plain paths). Only
# ever used in a plain assignment, so that a missing tool stops the script under set -e.
tool() {
  local path
  path=$(readlink -f "$bin_dir/$1" 2>/dev/null || true)
  if [ -z "$path" ] || [ ! -x "$path" ]; then
    die "$1 is missing from $bin_dir: run 'make tools' (hack/tools.sh) first"
  fi
  printf '%s\n' "$path"
}

# now_ms: wall clock in milliseconds, for the timings printed.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%01d' $(($1 / 1000)) $((($1 % 1000) / 100)); }

kwokctl_bin=$(tool kwokctl)
kubectl_bin=$(tool kubectl)
kwokctl() { "$kwokctl_bin" --name "$name" "$@"; }
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" "$@"; }

exists() { [ -f "$cluster_dir/kwok.yaml" ]; }

# serving: the API server answers /readyz with ok through the written kubeconfig.
serving() {
  [ -f "$kubeconfig" ] || return 1
  [ "$(kubectl get --raw /readyz --request-timeout=2s 2>/dev/null)" = ok ]
}

write_kubeconfig() {
  mkdir -p "$(dirname "$kubeconfig")"
  local tmp=$kubeconfig.tmp.$$
  (umask 077 && kwokctl get kubeconfig >"$tmp") || { rm -f "$tmp"; return 1; }
  mv "$tmp" "$kubeconfig"
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
  local seconds=$1 what=$2; shift 2
  local limit=$(($(now_ms) + seconds * 1000))
  until "$@"; do
    [ "$(now_ms)" -lt "$limit" ] || die "timed out after $seconds s waiting for $what (logs: $cluster_dir/logs)"
    sleep 0.2
  done
}

default_sa() { kubectl -n default get serviceaccount default --request-timeout=2s >/dev/null 2>&1; }

# check_loopback: fails when a process of the cluster listens anywhere but 127.0.0.1 (what
# hack/kwokctl.yaml's bindAddress promises). Skipped where ss(8) is not installed.
check_loopback() {
  command -v ss >/dev/null || return 0
  local pids bad
  # awk, not cat: kwokctl writes its pid files without a trailing newline.
  pids=$(awk 1 "$cluster_dir"/pids/*.pid 2>/dev/null | paste -sd'|' -)
  [ -n "$pids" ] || return 0
  bad=$(ss -Hltunp | grep -E "pid=($pids)," | awk '$5 !~ /^127\.0\.0\.1:/' || true)
  [ -z "$bad" ] || die "cluster $name listens beyond 127.0.0.1 (run 'hack/cluster.sh down'):"$'\n'"$bad"
}

# created_from: the inputs that shape a new cluster; compared with the stamp of a running one.
created_from() {
  sha256sum "$config" | cut -d' ' -f1
  printf '%s\n' "$apiserver" "$controller_manager" "$scheduler" "$kwok" "$etcd"
}

cmd_up() {
  local start t_ready created=false
  local apiserver controller_manager scheduler kwok etcd
  start=$(now_ms)
  apiserver=$(tool kube-apiserver)
  controller_manager=$(tool kube-controller-manager)
  scheduler=$(tool kube-scheduler)
  kwok=$(tool kwok)
  etcd=$(tool etcd)
  export KWOK_KUBECTL_BINARY=$kubectl_bin
  if exists && [ -f "$kubeconfig" ] && serving; then
    log "cluster $name already running, reusing it"
  else
    if exists; then
      log "cluster $name exists but is not serving: starting its components again"
    else
      log "creating cluster $name (binary runtime, 127.0.0.1 only) in $cluster_dir"
      created=true
    fi
    # --kubeconfig= keeps kwokctl from adding a context to ~/.kube/config; ours is written below.
    # For an existing cluster kwokctl ignores the configuration and restarts what is stopped.
    mkdir -p "$KWOK_WORKDIR"
    if ! kwokctl create cluster \
      --config "$config" \
      --runtime binary \
      --kubeconfig= \
      --timeout 2m \
      --kube-apiserver-binary "$apiserver" \
      --kube-controller-manager-binary "$controller_manager" \
      --kube-scheduler-binary "$scheduler" \
      --kwok-controller-binary "$kwok" \
      --etcd-binary "$etcd" \
      >"$kwokctl_log" 2>&1; then
      tail -n 20 "$kwokctl_log" >&2
      die "kwokctl could not start cluster $name (log: $kwokctl_log, components' logs: $cluster_dir/logs; 'hack/cluster.sh down' starts afresh)"
    fi
    if $created; then created_from >"$stamp"; fi
  fi
  write_kubeconfig
  wait_for "$READY_TIMEOUT" "the API server's /readyz" serving
  t_ready=$(now_ms)
  wait_for "$READY_TIMEOUT" "the default ServiceAccount in namespace default" default_sa
  check_loopback
  log "cluster $name ready in $(secs $(($(now_ms) - start))) s (API server /readyz ok after $(secs $((t_ready - start))) s, default ServiceAccount $(secs $(($(now_ms) - t_ready))) s later)"
  if [ -f "$stamp" ] && ! diff -q <(created_from) "$stamp" >/dev/null; then
    log "warning: hack/kwokctl.yaml or a binary changed since cluster $name was created; run 'hack/cluster.sh down' then 'up' to apply it"
  fi
  log "kubeconfig: $kubeconfig  (server $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}'))"
}

cmd_down() {
  if exists; then
    log "deleting cluster $name"
    # kwokctl removes its context from the kubeconfig it is given (it refuses none): ours.
    kwokctl delete cluster --kubeconfig "$kubeconfig" >"$kwokctl_log" 2>&1 \
      || { tail -n 20 "$kwokctl_log" >&2; die "kwokctl could not delete cluster $name (log: $kwokctl_log)"; }
  else
    log "cluster $name does not exist"
  fi
  rm -f "$kubeconfig" "$stamp" "$kwokctl_log"
  # kwokctl stops the processes it started (by their pid files); say so if any survived.
  local left
  left=$(pgrep -af -- "$cluster_dir/" || true)
  [ -z "$left" ] || die "processes of cluster $name still running:"$'\n'"$left"
}

cmd_stop() {
  if exists; then
    log "stopping cluster $name (its data stays in $cluster_dir)"
    kwokctl stop cluster >"$kwokctl_log" 2>&1 \
      || { tail -n 20 "$kwokctl_log" >&2; die "kwokctl could not stop cluster $name (log: $kwokctl_log)"; }
  else
    log "cluster $name does not exist"
  fi
}

# with_restore: the EXIT trap of `with`. Puts the cluster back as it was ($before, a global: the
# trap runs after cmd_with has returned) and keeps the command's exit status.
with_restore() {
  local rc=$?
  trap - EXIT
  case $before in
    0) log "cluster $name was running before: leaving it running" ;;
    1) cmd_stop ;;
    *) cmd_down ;;
  esac
  exit "$rc"
}

cmd_with() {
  [ $# -gt 0 ] || die "usage: $0 with COMMAND [ARG...]"
  before=0
  cmd_status 2>/dev/null || before=$?
  # However COMMAND ends, Ctrl-C included.
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap with_restore EXIT
  cmd_up
  "$@"
}

cmd_status() {
  if ! exists; then
    log "cluster $name: absent"
    return 3
  fi
  if [ -f "$kubeconfig" ] || write_kubeconfig 2>/dev/null; then
    if serving; then
      log "cluster $name: running, server $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}'), $(kubectl get nodes --no-headers 2>/dev/null | wc -l) node(s)"
      return 0
    fi
  fi
  log "cluster $name: stopped (files in $cluster_dir; 'hack/cluster.sh up' starts it again)"
  return 1
}

cmd_kubeconfig() {
  exists || die "cluster $name does not exist: run 'hack/cluster.sh up'"
  write_kubeconfig
  printf '%s\n' "$kubeconfig"
}

case ${1:-} in
  up) cmd_up ;;
  stop) cmd_stop ;;
  down) cmd_down ;;
  status) cmd_status ;;
  kubeconfig) cmd_kubeconfig ;;
  with) shift; cmd_with "$@" ;;
  *) echo "usage: $0 up|stop|down|status|kubeconfig|with COMMAND..." >&2; exit 2 ;;
esac
