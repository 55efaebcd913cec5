#!/usr/bin/env bash
# The local cluster's real node: kubelet and kube-proxy (v1.36.3, built with the control plane),
# Debian's containerd + runc and CNI plugins, and CoreDNS as the cluster DNS. CPU pods of stacks
# whose pools say `real: true` run here for real; GPU shapes stay on kwok's simulated nodes.
#
# testbed/node/node.sh COMMAND:
#   up        start the node (after testbed/cluster/cluster.sh up), import the local images, wait
#             until the Node is Ready
#   down      stop every process of the node, its containers, mounts and cgroups
#   status    exit 0 when the node's processes run, 1 otherwise
#   packages  install the Debian packages the node needs (apt; once per machine)
#   images NAME...  build the named local images if missing and import them into the running
#             node (what a stack deployed later needs: testbed/stack/stack.sh up runs it)
#   enforcer stop|start  stop or start Cilium's agent alone (KOLOTOC_NETWORK=cilium)
#
# Confinement: everything runs inside the cluster's network namespace (testbed/cluster/cluster.sh
# creates it; see there). The node's address (NODE_IP) sits on that namespace's loopback, the pods'
# bridge and veths live in it, and it has no route anywhere else: pods reach the node, the control
# plane, one another and nothing outside. The processes enter the namespace with nsenter(1), which
# keeps the machine's mount namespace (kubelet's volume mounts must be visible to containerd);
# `down` unmounts what they leave behind. Node processes and every container are kept in cgroups of
# the node's own (kolotoc-<cluster>-node, and kubelet's cgroupRoot /kolotoc-<cluster>), which is how
# `down` finds every process to stop and every cgroup to remove.
#
# The pods' network (KOLOTOC_NETWORK): `bridge` (the default), Debian's bridge CNI plugin, which
# enforces no NetworkPolicy; or `cilium`, Cilium's agent and CNI plugin (testbed/tools/tools.sh
# cilium), the enforcer of GKE Dataplane V2 and AKS, which enforces every NetworkPolicy on the
# node's pods (make test's cluster runs it). The agent runs in the cluster's network namespace and
# in a private mount namespace of its own: its BPF filesystem, its cgroup2 and a sysfs of the
# namespace are mounted there only, and the machine-wide kernel sysctls it would tune are
# read-only to it (it goes on without them). It routes the pods natively on the node's podCIDR
# (the Node's spec.podCIDR, set to POD_SUBNET), masquerades nothing, and leaves Services to
# kube-proxy. It is stopped after kubelet and containerd (their pods' endpoints are its to delete).
#
# Environment: KOLOTOC_CLUSTER (default kolotoc), as testbed/cluster/cluster.sh;
# KOLOTOC_NODE_IMAGES, the local images up builds and imports (names, space-separated; default
# every image): make up names only those its stack runs (testbed/images/images.sh needs);
# KOLOTOC_NETWORK, bridge or cilium (above).
set -euo pipefail

log_tag=node
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../lib.sh"
# name, netns, netns_path, cluster_dir; the addresses NODE_IP, POD_SUBNET, SERVICE_CIDR
cluster_env
node_dir=$root/.kolotoc/node/$name
logs=$node_dir/logs  # named when a wait times out
# Sockets and containerd's state: short paths (a unix socket path has at most 107 bytes).
run_dir=/run/kolotoc-$name
# containerd's root (content store and unpacked image layers) outlives the cluster: importing the
# images again on every `up` would cost a minute. Only unmounted snapshots live there.
# One per cluster: two containerds cannot share a root (its metadata database is locked), and
# make test's cluster (e2e) runs beside the user's (kolotoc).
containerd_root=$cache_dir/containerd-root
[ "$name" = kolotoc ] || containerd_root=$cache_dir/containerd-root-$name

# The node's name and the label that real-node pools select (components/meta).
NODE_NAME=kolotoc-node
REAL_NODE_LABEL=kolotoc.dev/real-node
BRIDGE=kolotoc0
# Ports inside the namespace.
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
PROXY_HEALTHZ_PORT=10256
COREDNS_HEALTH_PORT=8080
COREDNS_READY_PORT=8181
GIT_PORT=9418 # git daemon's port: the demo repository of kolotoc:code
# Cgroups: the node's daemons (containerd and its shims) and kubelet's root for the pods.
DAEMON_CGROUP=kolotoc-$name-node
POD_CGROUP_ROOT=kolotoc-$name
# Seconds to wait for the node to become Ready, for a daemon's socket or health port.
READY_TIMEOUT=120
# The pods' network: bridge or cilium (above).
network=${KOLOTOC_NETWORK:-bridge}
case $network in
  bridge | cilium) ;;
  *) die "KOLOTOC_NETWORK=$network: allowed are bridge (no NetworkPolicy enforced) and cilium (every NetworkPolicy enforced)" ;;
esac
# Cilium's agent: its state and API socket (the CNI plugin finds it through CILIUM_SOCK), and the
# health port it serves on the namespace's loopback.
CILIUM_DIR=$run_dir/cilium
CILIUM_SOCK=$CILIUM_DIR/cilium.sock
CILIUM_HEALTH_PORT=9879

# The Debian packages of the node (bookworm): the CRI runtime and its OCI runtime, CNI plugins, the
# packet filter kube-proxy programs, conntrack (kube-proxy clears stale UDP flows with it),
# mmdebstrap, which builds the local images (testbed/images/images.sh), jq, with which
# testbed/stack/stack.sh reads the CLI's JSON (`make down` keeps a cluster other stacks still use),
# and openssh-server, whose sshd the ring's tests run on loopback with the towers' own configuration
# (components/ring/sshd_test.go; its service is never started, as for every package here).
PACKAGES=(containerd runc containernetworking-plugins iptables conntrack mmdebstrap jq openssh-server)
# Cilium compiles its datapath at run time, with clang >= 18.1: bookworm's clang-19.
if [ "$network" = cilium ]; then PACKAGES+=(clang-19); fi

in_ns() { nsenter --net="$netns_path" -- "$@"; }

cmd_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || die "the real node needs root (containers, network namespaces, cgroups); missing packages: ${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  # Debian's containerd package would start a containerd of its own in the machine's namespaces:
  # forbid service starts during the install (policy-rc.d), unless the machine already does.
  local policy=/usr/sbin/policy-rc.d made_policy=false
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=true
  fi
  local rc=0
  { apt-get update -qq -o DPkg::Lock::Timeout=600 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"; } \
    >"${TMPDIR:-/tmp}/kolotoc-apt.log" 2>&1 || rc=$?
  if $made_policy; then rm -f "$policy"; fi
  [ $rc = 0 ] || { tail -n 20 "${TMPDIR:-/tmp}/kolotoc-apt.log" >&2; die "apt-get install failed"; }
}

# ---- configuration files ---------------------------------------------------------------------

# put FILE DAEMON...: writes stdin to node_dir/FILE when its content differs, and then restarts
# the running DAEMONs that read it. An unchanged file is left alone: kube-proxy exits when its
# configuration file is written, even with the same content.
put() {
  local file=$node_dir/$1 tmp d; shift
  tmp=$(mktemp "$file.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$file"; then rm -f "$tmp"; return 0; fi
  mv "$tmp" "$file"
  for d in "$@"; do
    if alive "$d"; then log "$(basename "$file") changed: restarting $d"; stop "$d"; fi
  done
}

write_configs() {
  local pause_ref=$1
  mkdir -p "$node_dir"/{cni,kubelet,logs,pod-logs,ipam} "$run_dir" "$containerd_root"
  # containerd takes one directory of CNI plugins: Debian's, or for Cilium one of the node's own
  # holding cilium-cni beside links to Debian's (containerd runs loopback in every pod).
  local cni_bin=/usr/lib/cni
  if [ "$network" = cilium ]; then
    cni_bin=$node_dir/cni-bin
    mkdir -p "$cni_bin"
    ln -sfn /usr/lib/cni/* "$cni_bin/"
    ln -sfn "$(tool cilium-cni)" "$cni_bin/cilium-cni"
  fi
  (umask 077 && put kubeconfig kubelet kube-proxy coredns <"$cluster_dir/kubeconfig.yaml")
  put containerd.toml containerd <<EOF
# containerd of the local real node (testbed/node/node.sh). Everything under the node's own paths.
version = 2
root = "$containerd_root"
state = "$run_dir/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$run_dir/containerd.sock"
[ttrpc]
  address = "$run_dir/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  # Local images only: the pause image is built here (testbed/images/images.sh); registries are
  # unreachable.
  sandbox_image = "$pause_ref"
  # Processes here lack CAP_SYS_RESOURCE: without this, runc fails every sandbox while trying
  # to lower oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  # Pod network namespaces are pinned under the state dir, not the machine's /run/netns.
  netns_mounts_under_state_dir = true
  # exec / attach / port-forward: served inside the namespace, reached by the kubelet only.
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$node_dir/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
  if [ "$network" = cilium ]; then
    rm -f "$node_dir/cni/10-kolotoc.conflist"
    put cni/05-cilium.conflist <<EOF
{
  "cniVersion": "0.3.1",
  "name": "cilium",
  "plugins": [{"type": "cilium-cni", "log-file": "$node_dir/logs/cilium-cni.log"}]
}
EOF
  else
    rm -f "$node_dir/cni/05-cilium.conflist"
    # One bridge inside the namespace, pods on POD_SUBNET, the bridge as their gateway. No ipMasq:
    # there is nowhere to masquerade to.
    put cni/10-kolotoc.conflist <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kolotoc",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node_dir/ipam",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
  fi
  # Pods resolve cluster names only: no upstream resolvers leak in from the machine.
  put resolv.conf kubelet </dev/null
  put kubelet.yaml kubelet <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
# The API server presents the cluster's admin certificate (testbed/cluster/kwokctl.yaml); nothing
# else may use the kubelet's API (pods can reach NODE_IP, but have no certificate of the cluster's
# CA).
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $cluster_dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$run_dir/containerd.sock
# This kernel has the cgroup v1 hierarchy only; the kubelet refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$POD_CGROUP_ROOT
failSwapOn: false
# The cluster DNS at the outside's address (testbed/cluster/local.env): CoreDNS runs on the node,
# not as pods, and pods must reach it as on a cloud, where no pod's egress policy reaches a node.
clusterDNS: [$OUTSIDE_IP]
clusterDomain: cluster.local
resolvConf: $node_dir/resolv.conf
podLogsDir: $node_dir/pod-logs
# The local images are imported, never pulled: image garbage collection must never remove them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Evict only when the machine is really out of memory; never for disk. Under disk pressure the
# kubelet reclaims by deleting every image no running container uses, pause included, and this
# node can pull none of them back: on a shared machine whose disk filled up (a Go build cache of
# tens of GB), "nodefs.available: 1%" left both of its nodes unable to start any pod ("0%" turns
# a signal off; kubelet's pkg/kubelet/eviction/helpers.go).
evictionHard: {memory.available: "200Mi", nodefs.available: "0%", imagefs.available: "0%"}
serializeImagePulls: false
maxPods: 110
EOF
  put kube-proxy.yaml kube-proxy <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $node_dir/kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_SUBNET
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:10249
# conntrack's table size is machine-wide: leave it alone (the namespace's timeouts are its own).
conntrack: {maxPerCore: 0, min: 0}
EOF
  put Corefile coredns <<EOF
# The cluster DNS: cluster names only (no forward plugin: pods reach nothing outside).
.:53 {
    errors
    health 127.0.0.1:$COREDNS_HEALTH_PORT
    ready 127.0.0.1:$COREDNS_READY_PORT
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $node_dir/kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
EOF
}

# ---- processes -------------------------------------------------------------------------------

pidfile() { echo "$node_dir/$1.pid"; }
# alive NAME: the daemon runs.
alive() { pid_alive "$(pidfile "$1")"; }

# cgroup_dirs NAME: the v1 hierarchies' directories of a cgroup of ours.
cgroup_dirs() {
  local c
  for c in /sys/fs/cgroup/*/; do
    case $c in */unified/) continue ;; esac
    echo "${c%/}/$1"
  done
}

# stop NAME: SIGTERM, then wait (10 s at most) until it is gone.
stop() { stop_pid "$(pidfile "$1")" 10; }

# daemon_cgroups: the cgroups of the node's daemons. pids finds every process to stop (shims and
# containers of a daemon that died included); memory measures what the node costs.
daemon_cgroups() { echo "/sys/fs/cgroup/pids/$DAEMON_CGROUP" "/sys/fs/cgroup/memory/$DAEMON_CGROUP"; }

# start NAME CMD...: runs CMD in the namespace, in the daemons' cgroups, in a session of its own,
# logging to logs/NAME.log. The pid file holds CMD's own pid (setsid and nsenter exec, no fork).
start() {
  local what=$1; shift
  if alive "$what"; then return 0; fi
  local dirs
  read -r -a dirs <<<"$(daemon_cgroups)"
  mkdir -p "${dirs[@]}"
  (
    for d in "${dirs[@]}"; do echo "$BASHPID" >"$d/cgroup.procs"; done
    exec setsid nsenter --net="$netns_path" -- "$@" >>"$node_dir/logs/$what.log" 2>&1 </dev/null
  ) &
  echo $! >"$(pidfile "$what")"
}

# make_pod_cgroup_root: kubelet's cgroupRoot must exist in every hierarchy before it starts (it
# creates kubepods below it). A new cpuset cgroup starts with no CPUs or memory nodes: copy the
# parent's.
make_pod_cgroup_root() {
  local d
  for d in $(cgroup_dirs "$POD_CGROUP_ROOT"); do
    mkdir -p "$d"
    case $d in
      */cpuset/*)
        cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
        cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
        ;;
    esac
  done
}

http_ok() { in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf 'GET $2 HTTP/1.0\r\n\r\n' >&3 && head -n1 <&3 | grep -q ' 200 '"; }

# kubectl (testbed/lib.sh) reads the cluster's kubeconfig as testbed/cluster/cluster.sh writes it:
# KOLOTOC_KUBECONFIG names it for a cluster other than the default (make test's e2e), whose node
# must be the one checked.
node_ready() {
  [ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# serve_code: the demo repository (testbed/node/demo-code, one commit on branch main, the same
# commit id on every machine) served read-only by git daemon as git://$OUTSIDE_IP/demo.git, for
# kolotoc:code. git daemon runs as nobody, inside the namespace, on the outside's address (a git
# host is outside the cluster): pods reach it, nothing outside the namespace does.
serve_code() {
  local git_dir=$run_dir/git work
  rm -rf "$git_dir"
  mkdir -p "$git_dir"
  work=$(mktemp -d)
  cp -a "$testbed/node/demo-code/." "$work/"
  (
    cd "$work"
    export GIT_AUTHOR_NAME=Kolotoc GIT_AUTHOR_EMAIL=testbed@kolotoc.invalid GIT_AUTHOR_DATE=2026-01-01T00:00:00Z
    export GIT_COMMITTER_NAME=Kolotoc GIT_COMMITTER_EMAIL=testbed@kolotoc.invalid GIT_COMMITTER_DATE=2026-01-01T00:00:00Z
    git init -q -b main .
    git add -A
    git -c commit.gpgsign=false commit -q -m "Kolotoc demo code (testbed/node/demo-code)"
  )
  git clone -q --bare "$work" "$git_dir/demo.git"
  rm -rf "$work"
  chown -R nobody:nogroup "$git_dir"
  start git-daemon env HOME="$git_dir" git daemon --reuseaddr --export-all --user=nobody --group=nogroup \
    --base-path="$git_dir" --listen="$OUTSIDE_IP" --port="$GIT_PORT" --informative-errors
  wait_for 30 "git daemon on $OUTSIDE_IP:$GIT_PORT" in_ns bash -c "exec 3<>/dev/tcp/$OUTSIDE_IP/$GIT_PORT"
}

# ---- Cilium (KOLOTOC_NETWORK=cilium) -----------------------------------------------------------

# cilium_crds: Cilium's CRDs from its module, which its operator would register (the agent waits
# for them; the operator is not run: one node needs none of its work).
cilium_crds() {
  local mod crds
  mod=$("$testbed/tools/tools.sh" --cilium-module)
  [ -n "$mod" ] || die "Cilium's module is missing: run 'testbed/tools/tools.sh cilium'"
  crds=$mod/pkg/k8s/apis/cilium.io/client/crds
  kubectl apply --server-side --force-conflicts -f "$crds/v2" -f "$crds/v2alpha1" >/dev/null
}

# node_pod_cidr: the Node's spec.podCIDR, once the kubelet has registered it: POD_SUBNET, from which
# Cilium's kubernetes IPAM gives the pods their addresses (the field can be set once only).
node_pod_cidr() {
  local cidr
  wait_for 60 "node $NODE_NAME to register" kubectl get node "$NODE_NAME"
  cidr=$(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}')
  if [ -z "$cidr" ]; then
    kubectl patch node "$NODE_NAME" --type merge \
      -p "{\"spec\":{\"podCIDR\":\"$POD_SUBNET\",\"podCIDRs\":[\"$POD_SUBNET\"]}}" >/dev/null
    cidr=$(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}')
  fi
  [ "$cidr" = "$POD_SUBNET" ] || die "node $NODE_NAME has podCIDR $cidr, not POD_SUBNET $POD_SUBNET (testbed/cluster/local.env)"
}

# start_cilium: the agent, in the namespace and in a mount namespace of its own (see the top).
# Flags: native routing on the pods' subnet, no masquerading, no IPv6; Services stay kube-proxy's
# (no kube-proxy replacement, no socket load-balancing); no L7 proxy, Hubble or health probing
# (one node, no Envoy); identities as CRDs (no kvstore); per-endpoint routes, as GKE Dataplane V2
# and AKS run it (cilium/cilium#28324), and the host's legacy routing: every pod's packets pass the
# namespace's routing and netfilter (kube-proxy's rules, and the conntrack events the e2e suite
# records flows from), and each pod's ingress policy is enforced on its own interface. The agent
# counts every address of the namespace as the host's (the node), so the outside's address and
# the link-local range, where the e2e suite puts its metadata stand-ins, are excluded: to a pod
# they are the world, as a cloud's control plane, git host and metadata server are.
start_cilium() {
  local agent clang=/usr/lib/llvm-19/bin
  agent=$(tool cilium-agent)
  [ -x "$clang/clang" ] || die "clang-19 is missing: run 'testbed/node/node.sh packages' with KOLOTOC_NETWORK=cilium"
  mkdir -p "$CILIUM_DIR/cgroup2"
  # shellcheck disable=SC2016 # expanded by the inner shell
  start cilium-agent env K8S_NODE_NAME="$NODE_NAME" PATH="$clang:$PATH" \
    unshare --mount --propagation private -- bash -c '
      set -e
      mount -t sysfs sysfs /sys
      mount -t bpf bpf /sys/fs/bpf
      mount -t cgroup2 cgroup2 "$1"
      mount --bind /proc/sys/kernel /proc/sys/kernel
      mount -o remount,bind,ro /proc/sys/kernel
      shift
      exec "$@"' cilium-agent "$CILIUM_DIR/cgroup2" \
    "$agent" --k8s-kubeconfig-path="$node_dir/kubeconfig" \
    --state-dir="$CILIUM_DIR" --socket-path="$CILIUM_SOCK" --lib-dir="$(dirname "$agent")/lib" \
    --bpf-root=/sys/fs/bpf --cgroup-root="$CILIUM_DIR/cgroup2" \
    --routing-mode=native --ipv4-native-routing-cidr="$POD_SUBNET" --enable-ipv4-masquerade=false \
    --enable-ipv6=false --ipam=kubernetes --kube-proxy-replacement=false --bpf-lb-sock=false \
    --enable-host-legacy-routing=true --enable-endpoint-routes=true --install-iptables-rules=true \
    --enable-l7-proxy=false --enable-hubble=false --enable-health-checking=false \
    --enable-endpoint-health-checking=false --identity-allocation-mode=crd \
    --agent-health-port="$CILIUM_HEALTH_PORT" \
    --exclude-local-address="$OUTSIDE_IP/32" --exclude-local-address=169.254.0.0/16
  wait_for "$READY_TIMEOUT" "Cilium's agent (first start compiles its datapath)" http_ok "$CILIUM_HEALTH_PORT" /healthz
}

cmd_up() {
  local start_ms
  start_ms=$(now_ms)
  [ -e "$netns_path" ] || die "network namespace $netns is missing: run 'testbed/cluster/cluster.sh up' first"
  [ -f "$cluster_dir/kubeconfig.yaml" ] || die "cluster $name has no kubeconfig: run 'testbed/cluster/cluster.sh up' first"
  cmd_packages
  # Leftovers of a node whose processes were killed (a session or machine that stopped without
  # `down`): clear them before starting anew.
  if ! alive containerd && ! alive kubelet && { [ -d "$run_dir" ] || [ -d "/sys/fs/cgroup/pids/$POD_CGROUP_ROOT" ]; }; then
    log "clearing what a previous node left behind (its processes are gone)"
    cmd_down
  fi
  kubectl_bin=$(tool kubectl)
  local kubelet kube_proxy coredns
  kubelet=$(tool kubelet)
  kube_proxy=$(tool kube-proxy)
  coredns=$(tool coredns)
  local images=()
  read -r -a images <<<"${KOLOTOC_NODE_IMAGES:-}"
  "$testbed/images/images.sh" build "${images[@]}"
  write_configs "$("$testbed/images/images.sh" ref pause)"
  # Forwarding and bridged traffic through iptables (kube-proxy's ClusterIPs between pods on one
  # bridge): both settings are the namespace's own.
  in_ns sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  start containerd env CILIUM_SOCK="$CILIUM_SOCK" containerd --config "$node_dir/containerd.toml"
  wait_for 30 "containerd's socket" test -S "$run_dir/containerd.sock"
  wait_for 30 "containerd to serve" ctr --address "$run_dir/containerd.sock" version
  "$testbed/images/images.sh" import "$run_dir/containerd.sock" "${images[@]}"
  start coredns "$coredns" -conf "$node_dir/Corefile"
  make_pod_cgroup_root
  start kubelet "$kubelet" --config "$node_dir/kubelet.yaml" --kubeconfig "$node_dir/kubeconfig" \
    --root-dir "$node_dir/kubelet" --cert-dir "$node_dir/kubelet/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --node-labels "$REAL_NODE_LABEL=true" --v=1
  start kube-proxy "$kube_proxy" --config "$node_dir/kube-proxy.yaml"
  if [ "$network" = cilium ]; then
    cilium_crds
    node_pod_cidr
    start_cilium
  fi
  serve_code
  wait_for "$READY_TIMEOUT" "CoreDNS to be ready" http_ok "$COREDNS_READY_PORT" /ready
  wait_for "$READY_TIMEOUT" "node $NODE_NAME to be Ready" node_ready
  # kube-proxy reports healthy once its Node exists and its rules are in place.
  wait_for "$READY_TIMEOUT" "kube-proxy's healthz" http_ok "$PROXY_HEALTHZ_PORT" /healthz
  log "node $NODE_NAME ready in $(secs $(($(now_ms) - start_ms))) s (kubelet, kube-proxy, containerd, CoreDNS$([ "$network" = bridge ] || echo ", Cilium") in netns $netns; node IP $NODE_IP, pods $POD_SUBNET)"
}

# kill_cgroup NAME: SIGKILL every process of one of our cgroups (and its children cgroups).
kill_cgroup() {
  local pids
  for _ in 1 2 3 4 5; do
    # find's paths are cgroup directories of ours, without spaces: split on purpose.
    # shellcheck disable=SC2046,SC2002 # cat of several files
    pids=$(cat $(find /sys/fs/cgroup/pids/"$1" -name cgroup.procs 2>/dev/null) 2>/dev/null | sort -u || true)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.2
  done
}

cmd_down() {
  local p
  # The daemons first (gracefully: kubelet and containerd end their work), then whatever is left
  # in our cgroups: shims and containers.
  for p in kube-proxy kubelet coredns containerd; do
    if alive "$p"; then kill -TERM "$(cat "$(pidfile "$p")")" 2>/dev/null || true; fi
  done
  for _ in $(seq 1 30); do
    alive kubelet || alive containerd || alive kube-proxy || alive coredns || break
    sleep 0.2
  done
  # Cilium's agent last: containerd tears pods down through its CNI plugin, which waits for the
  # agent.
  stop cilium-agent
  kill_cgroup "$POD_CGROUP_ROOT"
  kill_cgroup "$DAEMON_CGROUP"
  rm -f "$node_dir"/*.pid
  # Mounts left by containers, volumes and pinned pod namespaces: deepest first.
  local m
  # Mount points of ours have no spaces (our own directories): one word each.
  # shellcheck disable=SC2013
  for m in $(awk '{print $5}' /proc/self/mountinfo | grep -E "^($node_dir|$run_dir|$containerd_root)(/|$)" | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  # Cgroups, children before parents.
  local dirs
  for m in $(cgroup_dirs "$POD_CGROUP_ROOT") $(daemon_cgroups); do
    [ -d "$m" ] || continue
    dirs=$(find "$m" -depth -type d 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$dirs" ] || rmdir $dirs 2>/dev/null || true
  done
  rm -rf "$run_dir" "$node_dir"
  local left
  left=$(awk '{print $5}' /proc/self/mountinfo | grep -cE "^($node_dir|$run_dir|$containerd_root)(/|$)" || true)
  [ "$left" = 0 ] || die "$left mount(s) of the node are still mounted"
  for m in $(cgroup_dirs "$POD_CGROUP_ROOT") $(daemon_cgroups); do
    [ ! -d "$m" ] || die "cgroup $m is still there"
  done
}

cmd_status() {
  local p ok=0
  local daemons=(containerd coredns kubelet kube-proxy)
  if [ "$network" = cilium ] || alive cilium-agent; then daemons+=(cilium-agent); fi
  for p in "${daemons[@]}"; do
    if alive "$p"; then log "$p: running (pid $(cat "$(pidfile "$p")"))"; else log "$p: not running"; ok=1; fi
  done
  return $ok
}

# cmd_images NAME...: the named images built if missing and imported into the running node.
cmd_images() {
  [ $# -gt 0 ] || return 0
  "$testbed/images/images.sh" build "$@"
  if [ -S "$run_dir/containerd.sock" ] && alive containerd; then
    "$testbed/images/images.sh" import "$run_dir/containerd.sock" "$@"
  fi
}

# cmd_enforcer stop|start: Cilium's agent alone stopped or started again on a running node (the
# e2e suite's check that it refuses to run without an enforcer).
cmd_enforcer() {
  [ "$network" = cilium ] || die "the node's network is $network: no enforcer to stop or start (KOLOTOC_NETWORK=cilium)"
  case ${1:-} in
    stop) stop cilium-agent ;;
    start) start_cilium ;;
    *) die "usage: $0 enforcer stop|start" ;;
  esac
}

case ${1:-} in
  up) cmd_up ;;
  enforcer) shift; cmd_enforcer "$@" ;;
  images) shift; cmd_images "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  packages) cmd_packages ;;
  *) echo "usage: $0 up|down|status|packages|images NAME...|enforcer stop|start" >&2; exit 2 ;;
esac
