#!/usr/bin/env bash
# The test bed's local Kubernetes cluster: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (playing the simulated nodes' kubelets), started as plain processes by
# `kwokctl --runtime binary`; simpool (testbed/cluster/simpool: the simulated cloud's node pools,
# making each SimulatedNodePool's Nodes); Kueue (testbed/tools/kueue: queues, quotas and gang
# admission, docs/queueing.md), a process in the namespace whose webhooks the API server calls on
# the namespace's loopback (testbed/cluster/kueuelocal); and the real node (testbed/node/node.sh:
# kubelet, kube-proxy, containerd, CoreDNS) where pods run for real.
#
# Network confinement: the whole cluster lives in a network namespace of its own, kolotoc-<cluster>
# (/run/netns/kolotoc-<cluster>): its loopback carries the control plane, its bridge the pods. It
# has no interface, route or NAT towards the machine's network. The only way in is nsbridge
# (testbed/cluster/nsbridge), which listens on the host's 127.0.0.1 at the API server's port and
# dials the API server on the namespace's own loopback: kubectl, pulumi and `kubectl port-forward`
# work from the host as before, and nothing else of the cluster is reachable from the machine, nor
# the machine from the cluster.
#
# testbed/cluster/cluster.sh COMMAND:
#   up          start the cluster, or reuse it when it already runs; wait until the API server is
#               ready and the default ServiceAccount exists; write the kubeconfig; then the real
#               node (KOLOTOC_REAL_NODE=0: without)
#   stop        stop its processes, keep its data (`up` starts it again)
#   down        delete the cluster: its processes, listeners and files
#   status      say whether it runs; exit 0 when it serves, 1 when it is stopped, 3 when there is
#               no such cluster
#   kubeconfig  print the kubeconfig's path (rewritten from the running cluster)
#   with CMD... run CMD with the cluster up, then put the cluster back as it was (left running,
#               stopped, or deleted); exit with CMD's status
#
# Environment:
#   KOLOTOC_CLUSTER     cluster name (default kolotoc)
#   KOLOTOC_KUBECONFIG  where the kubeconfig is written (default .kolotoc/kubeconfig)
#   KOLOTOC_REAL_NODE   1 (default): start the real node with the cluster; 0: simulated nodes only
#   KOLOTOC_KUEUE       1 (default): run Kueue in the cluster when it is built
#                       (testbed/tools/tools.sh kueue); 0: without (its webhooks and CRDs are then
#                       removed)
#   KOLOTOC_KARPENTER   1 (default): run Karpenter (its kwok provider) when it is built
#                       (testbed/tools/tools.sh karpenter): the autoscaler of simulated pools that
#                       start at zero; 0: without (such pools then never get a node)
#
# Binaries come from .kolotoc/bin (testbed/tools/tools.sh). The cluster's files live under
# .kolotoc/kwok (KWOK_WORKDIR) and .kolotoc/kube-cache; nothing goes to ~/.kwok or ~/.kube. The
# kwokctl configuration, including the stage that gives simulated GPU nodes their capacity, is
# testbed/cluster/kwokctl.yaml.
set -euo pipefail

log_tag=cluster
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../lib.sh"
# name, netns, netns_path, KWOK_WORKDIR, cluster_dir; NODE_IP, OUTSIDE_IP, POD_SUBNET, SERVICE_CIDR
cluster_env
logs=$cluster_dir/logs  # named when a wait times out
template=$testbed/cluster/kwokctl.yaml
real_node=${KOLOTOC_REAL_NODE:-1}
kueue_on=${KOLOTOC_KUEUE:-1}
karpenter_on=${KOLOTOC_KARPENTER:-1}
# kubectl's discovery cache (default ~/.kube/cache), for ours and the one kwokctl runs.
export KUBECACHEDIR=${KUBECACHEDIR:-$root/.kolotoc/kube-cache}
# testbed/cluster/kwokctl.yaml with this cluster's paths filled in (@CLUSTER_DIR@).
config=$KWOK_WORKDIR/$name.kwokctl.yaml
bridge_pid=$KWOK_WORKDIR/$name.nsbridge.pid
bridge_log=$KWOK_WORKDIR/$name.nsbridge.log
simpool_pid=$KWOK_WORKDIR/$name.simpool.pid
simpool_log=$KWOK_WORKDIR/$name.simpool.log
kueue_pid=$KWOK_WORKDIR/$name.kueue.pid
kueue_log=$KWOK_WORKDIR/$name.kueue.log
# kueuelocal's output: CRDs and loopback webhooks, the serving certificate, Kueue's Configuration.
kueue_dir=$KWOK_WORKDIR/$name.kueue
# Kueue's webhook port on the namespace's loopback (each cluster has a loopback of its own).
KUEUE_WEBHOOK_PORT=9443
karpenter_pid=$KWOK_WORKDIR/$name.karpenter.pid
karpenter_log=$KWOK_WORKDIR/$name.karpenter.log
# Karpenter's metrics and health ports in the namespace (its defaults, 8080 and 8081, are Kueue's).
KARPENTER_METRICS_PORT=18080
KARPENTER_HEALTH_PORT=18081
# The instance types Karpenter offers: Kolotoc's machine catalogue (written from stacks'
# KarpenterInstanceTypes; a test keeps the two equal).
karpenter_types=$testbed/cluster/karpenter/instance-types.json
# What the running cluster was created from; a change means `down` and `up` to apply it.
stamp=$KWOK_WORKDIR/$name.created-from
kwokctl_log=$KWOK_WORKDIR/$name.kwokctl.log

# How long to wait for the API server and for the default ServiceAccount (seconds).
READY_TIMEOUT=120

kwokctl_bin=$(tool kwokctl)
kubectl_bin=$(tool kubectl)
# kwokctl runs inside the cluster's namespace: the processes it starts stay there. (Without the
# namespace there is nothing of the cluster running: `delete` of its files needs none.)
kwokctl() {
  if [ -e "$netns_path" ]; then
    nsenter --net="$netns_path" -- "$kwokctl_bin" --name "$name" "$@"
  else
    "$kwokctl_bin" --name "$name" "$@"
  fi
}

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

default_sa() { kubectl -n default get serviceaccount default --request-timeout=2s >/dev/null 2>&1; }

# check_loopback: fails when a process of the control plane listens anywhere but 127.0.0.1 of the
# namespace (what testbed/cluster/kwokctl.yaml's bindAddress promises; the API server's own port
# excepted, which pods reach inside the namespace), or nsbridge anywhere but the host's 127.0.0.1.
# Skipped where ss(8) is not installed.
check_loopback() {
  command -v ss >/dev/null || return 0
  local pids bad
  # awk, not cat: kwokctl writes its pid files without a trailing newline.
  pids=$(awk 1 "$cluster_dir"/pids/*.pid 2>/dev/null | paste -sd'|' -)
  if [ -n "$pids" ]; then
    bad=$(nsenter --net="$netns_path" -- ss -Hltunp | grep -E "pid=($pids)," \
      | awk -v api=":$(api_port)$" '$5 !~ /^127\.0\.0\.1:/ && !(/"kube-apiserver"/ && $5 ~ api)' || true)
    [ -z "$bad" ] || die "cluster $name listens beyond 127.0.0.1 (run 'testbed/cluster/cluster.sh down'):"$'\n'"$bad"
  fi
  bad=$(ss -Hltnp | grep -F "pid=$(cat "$bridge_pid" 2>/dev/null || echo none)," | awk '$4 !~ /^127\.0\.0\.1:/' || true)
  [ -z "$bad" ] || die "nsbridge listens beyond 127.0.0.1:"$'\n'"$bad"
}

# ensure_netns: the cluster's network namespace, with its loopback up and the node's address and
# the outside's on it. Nothing else: no veth to the machine, no route out.
ensure_netns() {
  [ -e "$netns_path" ] || { ip netns add "$netns" || die "could not create network namespace $netns (root is needed)"; }
  nsenter --net="$netns_path" -- ip link set lo up
  nsenter --net="$netns_path" -- ip addr replace "$NODE_IP/32" dev lo
  nsenter --net="$netns_path" -- ip addr replace "$OUTSIDE_IP/32" dev lo
}

api_port() { kwokctl get kubeconfig 2>/dev/null | sed -n 's#^ *server: https\{0,1\}://127\.0\.0\.1:\([0-9]*\).*#\1#p' | head -n1; }

# bridge_alive: nsbridge runs.
bridge_alive() { pid_alive "$bridge_pid"; }

# free_api_port: a port nothing listens on at the host's 127.0.0.1, counting down from 32700.
# kwokctl gives a new cluster's components the first free ports below 32768 of the namespace it
# runs in, which are the same in every fresh namespace; nsbridge must listen on the API server's
# port on the host, where another cluster's bridge (make test's beside the user's) may hold it
# already. So the API server's port is chosen here, below the few kwokctl hands its other
# components (32767 down), which it does not know to skip.
free_api_port() {
  local p
  for ((p = 32700; p > 30000; p--)); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  die "no free port on 127.0.0.1 between 30001 and 32700 for the API server"
}

# start_bridge: nsbridge from the host's 127.0.0.1:<API port> to the namespace's.
start_bridge() {
  bridge_alive && return 0
  local port nsbridge_bin
  port=$(api_port)
  [ -n "$port" ] || die "could not read the API server's port from kwokctl's kubeconfig"
  nsbridge_bin=$(tool nsbridge)
  setsid "$nsbridge_bin" -netns "$netns_path" -forward "127.0.0.1:$port=127.0.0.1:$port" >>"$bridge_log" 2>&1 </dev/null &
  echo $! >"$bridge_pid"
  sleep 0.2
  bridge_alive || { tail -n 5 "$bridge_log" >&2; die "nsbridge could not listen on the host's 127.0.0.1:$port (in use?)"; }
}

stop_bridge() { stop_pid "$bridge_pid" 5; }

# simpool_alive: the node-pool controller runs.
simpool_alive() { pid_alive "$simpool_pid"; }

pool_kind_served() {
  [ "$(kubectl get crd simulatednodepools.kolotoc.dev --request-timeout=2s \
    -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]
}

# start_simpool: the simulated node pools' controller (testbed/cluster/simpool), inside the
# cluster's namespace like the control plane; it installs the SimulatedNodePool kind, then makes
# each pool's Nodes. Started again when its binary is newer than the running one.
start_simpool() {
  local simpool_bin
  simpool_bin=$(tool simpool)
  if simpool_alive && [ ! "$simpool_bin" -nt "$simpool_pid" ]; then return 0; fi
  stop_simpool
  setsid nsenter --net="$netns_path" -- "$simpool_bin" -kubeconfig "$kubeconfig" >>"$simpool_log" 2>&1 </dev/null &
  echo $! >"$simpool_pid"
  wait_for 60 "the SimulatedNodePool kind (simpool's log: $simpool_log)" pool_kind_served
  simpool_alive || { tail -n 5 "$simpool_log" >&2; die "simpool exited (log: $simpool_log)"; }
}

stop_simpool() { stop_pid "$simpool_pid" 5; }

# kueue_alive: Kueue runs.
kueue_alive() { pid_alive "$kueue_pid"; }

# kueue_serving: Kueue's webhooks answer: a server-side dry run of a ResourceFlavor goes through
# its mutating and validating webhooks (failurePolicy Fail), so it succeeds only once they serve.
kueue_serving() {
  kubectl create --dry-run=server -o name -f - >/dev/null 2>&1 <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: kolotoc-probe
YAML
}

# kueue_crds_established: the API server serves Kueue's kinds (right after the apply a CRD has no
# conditions yet, and `kubectl wait` fails on that rather than waiting).
kueue_crds_established() {
  local crd
  for crd in clusterqueues localqueues resourceflavors workloads workloadpriorityclasses; do
    [ "$(kubectl get crd "$crd.kueue.x-k8s.io" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] || return 1
  done
}

# start_kueue: Kueue inside the cluster's network namespace, when it is built and not turned off
# (KOLOTOC_KUEUE=0). Its CRDs and webhook configurations are applied first (server-side apply,
# idempotent); the webhooks of pods, Jobs and StatefulSets select objects labelled with a queue
# only, so a stack without a queue never waits on Kueue.
start_kueue() {
  local kueue_bin module start
  if [ "$kueue_on" != 1 ] || [ ! -e "$bin_dir/kueue" ]; then
    stop_kueue
    remove_kueue_webhooks
    return 0
  fi
  start=$(now_ms)
  kueue_bin=$(tool kueue)
  if kueue_alive && [ ! "$kueue_bin" -nt "$kueue_pid" ] && kueue_serving; then return 0; fi
  stop_kueue
  module=$("$testbed/tools/tools.sh" --kueue-module)
  [ -d "$module" ] || die "the Kueue module is not in the module cache: testbed/tools/tools.sh kueue"
  "$(tool kueuelocal)" -module "$module" -out "$kueue_dir" -port "$KUEUE_WEBHOOK_PORT"
  kubectl apply --server-side --force-conflicts --field-manager=kolotoc-cluster -f "$kueue_dir/manifests.yaml" >/dev/null
  wait_for 60 "Kueue's CustomResourceDefinitions" kueue_crds_established
  # Kueue reads its metrics certificate from /etc/kueue/metrics/certs (fixed in cmd/kueue): in a
  # mount namespace of its own, kueuelocal's etc/ is laid over /etc, read-only; the host's /etc
  # is not touched. Its on-demand visibility API (an aggregated API server behind a Service, with
  # a certificate at /visibility) is off: nothing here reads it.
  # shellcheck disable=SC2016 # expanded by the inner shell
  setsid nsenter --net="$netns_path" -- unshare --mount --propagation private -- \
    sh -c 'mount -t overlay kolotoc-kueue -o "lowerdir=$1:/etc" /etc && shift && exec "$@"' sh "$kueue_dir/etc" \
    "$kueue_bin" --config "$kueue_dir/config.yaml" --kubeconfig "$kubeconfig" --feature-gates=VisibilityOnDemand=false \
    >>"$kueue_log" 2>&1 </dev/null &
  echo $! >"$kueue_pid"
  wait_for 90 "Kueue's webhooks (Kueue's log: $kueue_log)" kueue_serving
  kueue_alive || { tail -n 5 "$kueue_log" >&2; die "Kueue exited (log: $kueue_log)"; }
  log "Kueue $(basename "$(dirname "$kueue_bin")") serving in $(secs $(($(now_ms) - start))) s"
}

stop_kueue() { stop_pid "$kueue_pid" 10; }

# remove_kueue_webhooks: with Kueue off, its webhooks would refuse every queued object.
remove_kueue_webhooks() {
  kubectl delete mutatingwebhookconfiguration kueue-mutating-webhook-configuration --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete validatingwebhookconfiguration kueue-validating-webhook-configuration --ignore-not-found >/dev/null 2>&1 || true
}

# karpenter_ready: Karpenter's readiness endpoint answers (its manager started, its CRDs found).
karpenter_ready() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  timeout 3 nsenter --net="$netns_path" -- bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET /readyz HTTP/1.0\r\n\r\n" >&3 && head -n 1 <&3 | grep -q " 200 "' \
    bash "$KARPENTER_HEALTH_PORT" 2>/dev/null
}

karpenter_crds_established() {
  local crd
  for crd in nodepools.karpenter.sh nodeclaims.karpenter.sh kwoknodeclasses.karpenter.kwok.sh; do
    [ "$(kubectl get crd "$crd" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] || return 1
  done
}

# start_karpenter: Karpenter's core with its kwok cloud provider (testbed/tools/karpenter), the
# autoscaler of the simulated pools that start at zero (components/cluster/karpenter.go), inside
# the cluster's network namespace, when it is built and not turned off (KOLOTOC_KARPENTER=0). Its
# CRDs (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass) come from its module; the nodes it makes
# are annotated kwok.x-k8s.io/node=fake, so kwok plays their kubelets as it does the fixed
# pools'. One replica, no leader election (as the control plane here: a lost lease on a loaded
# machine would stop it). Started again when its binary or the instance types are newer.
start_karpenter() {
  local karpenter_bin module start
  if [ "$karpenter_on" != 1 ] || [ ! -e "$bin_dir/karpenter" ]; then
    stop_karpenter
    return 0
  fi
  start=$(now_ms)
  karpenter_bin=$(tool karpenter)
  if pid_alive "$karpenter_pid" && [ ! "$karpenter_bin" -nt "$karpenter_pid" ] && [ ! "$karpenter_types" -nt "$karpenter_pid" ] \
    && karpenter_ready; then
    return 0
  fi
  stop_karpenter
  module=$("$testbed/tools/tools.sh" --karpenter-module)
  [ -d "$module" ] || die "the Karpenter module is not in the module cache: testbed/tools/tools.sh karpenter"
  kubectl apply --server-side --force-conflicts --field-manager=kolotoc-cluster \
    -f "$module/kwok/charts/crds/" -f "$module/kwok/apis/crds/" >/dev/null
  wait_for 60 "Karpenter's CustomResourceDefinitions" karpenter_crds_established
  setsid nsenter --net="$netns_path" -- env KUBECONFIG="$kubeconfig" INSTANCE_TYPES_FILE_PATH="$karpenter_types" \
    DISABLE_LEADER_ELECTION=true METRICS_PORT=$KARPENTER_METRICS_PORT HEALTH_PROBE_PORT=$KARPENTER_HEALTH_PORT \
    LOG_LEVEL=info "$karpenter_bin" >>"$karpenter_log" 2>&1 </dev/null &
  echo $! >"$karpenter_pid"
  wait_for 90 "Karpenter ready (its log: $karpenter_log)" karpenter_ready
  pid_alive "$karpenter_pid" || { tail -n 5 "$karpenter_log" >&2; die "Karpenter exited (log: $karpenter_log)"; }
  log "Karpenter $(basename "$(dirname "$karpenter_bin")") ready in $(secs $(($(now_ms) - start))) s"
}

stop_karpenter() { stop_pid "$karpenter_pid" 10; }

render_config() {
  # The `kubernetes` Service's ClusterIP is the first address of SERVICE_CIDR.
  local net=${SERVICE_CIDR%/*}
  local api_service_ip=${net%.*}.$((${net##*.} + 1))
  mkdir -p "$KWOK_WORKDIR"
  sed -e "s#@CLUSTER_DIR@#$cluster_dir#g" -e "s#@NODE_IP@#$NODE_IP#g" -e "s#@OUTSIDE_IP@#$OUTSIDE_IP#g" -e "s#@SERVICE_CIDR@#$SERVICE_CIDR#g" \
    -e "s#@API_SERVICE_IP@#$api_service_ip#g" \
    "$template" >"$config.tmp" && mv "$config.tmp" "$config"
}

# created_from: the inputs that shape a new cluster; compared with the stamp of a running one.
created_from() {
  cat "$template" "$testbed/cluster/local.env" | sha256sum | cut -d' ' -f1
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
  ensure_netns
  render_config
  if exists && [ -f "$kubeconfig" ] && bridge_alive && serving; then
    log "cluster $name already running, reusing it"
  else
    if exists; then
      log "cluster $name exists but is not serving: starting its components again"
    else
      KWOK_KUBE_APISERVER_PORT=$(free_api_port)
      export KWOK_KUBE_APISERVER_PORT
      log "creating cluster $name (binary runtime, in netns $netns, API server port $KWOK_KUBE_APISERVER_PORT) in $cluster_dir"
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
      die "kwokctl could not start cluster $name (log: $kwokctl_log, components' logs: $cluster_dir/logs; 'testbed/cluster/cluster.sh down' starts afresh)"
    fi
    if $created; then created_from >"$stamp"; fi
  fi
  start_bridge
  write_kubeconfig
  wait_for "$READY_TIMEOUT" "the API server's /readyz" serving
  t_ready=$(now_ms)
  wait_for "$READY_TIMEOUT" "the default ServiceAccount in namespace default" default_sa
  check_loopback
  start_simpool
  start_kueue
  start_karpenter
  log "cluster $name ready in $(secs $(($(now_ms) - start))) s (API server /readyz ok after $(secs $((t_ready - start))) s, default ServiceAccount $(secs $(($(now_ms) - t_ready))) s later)"
  if [ -f "$stamp" ] && ! diff -q <(created_from) "$stamp" >/dev/null; then
    log "warning: testbed/cluster/kwokctl.yaml or a binary changed since cluster $name was created; run 'testbed/cluster/cluster.sh down' then 'up' to apply it"
  fi
  log "kubeconfig: $kubeconfig  (server $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}'), through nsbridge into netns $netns)"
  if [ "$real_node" = 1 ]; then "$testbed/node/node.sh" up; fi
}

# remove_netns: the namespace goes last, once no process is left in it.
remove_netns() {
  [ -e "$netns_path" ] || return 0
  local left
  left=$(ip netns pids "$netns" 2>/dev/null | paste -sd' ' -)
  [ -z "$left" ] || die "processes still in network namespace $netns: $left"
  ip netns del "$netns"
}

cmd_down() {
  "$testbed/node/node.sh" down
  stop_simpool
  stop_kueue
  stop_karpenter
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
  stop_bridge
  rm -f "$config" "$bridge_log" "$simpool_log" "$kueue_log" "$karpenter_log"
  rm -rf "$kueue_dir"
  remove_netns
}

cmd_stop() {
  "$testbed/node/node.sh" down
  stop_simpool
  stop_kueue
  stop_karpenter
  if exists; then
    log "stopping cluster $name (its data stays in $cluster_dir)"
    kwokctl stop cluster >"$kwokctl_log" 2>&1 \
      || { tail -n 20 "$kwokctl_log" >&2; die "kwokctl could not stop cluster $name (log: $kwokctl_log)"; }
  else
    log "cluster $name does not exist"
  fi
  stop_bridge
  remove_netns
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
  log "cluster $name: stopped (files in $cluster_dir; 'testbed/cluster/cluster.sh up' starts it again)"
  return 1
}

cmd_kubeconfig() {
  exists || die "cluster $name does not exist: run 'testbed/cluster/cluster.sh up'"
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
