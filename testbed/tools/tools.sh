#!/usr/bin/env bash
# Builds the test bed's tools from source through the Go module proxy, once per machine.
#
# testbed/tools/tools.sh ARGUMENTS:
#   [TOOL...]                      build what is missing (all tools when none is named)
#   --path                         print the directory to put on PATH (after building)
#   --install-plugins PULUMI_HOME  put the Kubernetes provider into that PULUMI_HOME's plugin cache
#
# Each tool is built from a wrapper module beside this script, testbed/tools/<tool>/ (go.mod +
# go.sum committed, so every module is checked against go.sum and the checksum database) into a
# per-user cache keyed by tool and version:
# ${KOLOTOC_TOOLS_DIR:-~/.cache/kolotoc/tools}/<tool>-<version>/. A fresh clone on the same machine
# reuses it; only a missing tool is rebuilt. A tool already on PATH at the pinned version is used as
# it is. Links to the binaries land in .kolotoc/bin/ (git-ignored).
set -euo pipefail

log_tag=tools
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../lib.sh"
# The cache key: <tool>-<version> under this directory (not under KOLOTOC_CACHE_DIR).
tools_dir=${KOLOTOC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kolotoc/tools}
modules=$testbed/tools
mkdir -p "$tools_dir" "$bin_dir"

# Pinned versions (toolchain.md). Changing one here changes its cache key.
PULUMI_VERSION=v3.250.0
LANGHOST_VERSION=v3.66.0
ETCD_VERSION=v3.6.16
KUBE_VERSION=v1.36.3
KWOK_VERSION=v0.8.0
ACTIONLINT_VERSION=v1.7.12
STATICCHECK_VERSION=v0.8.2 # staticcheck 2026.1.2, the release line that knows Go 1.26
COREDNS_VERSION=v1.15.0
# Kueue, the queue and gang admission the local cluster runs (testbed/tools/kueue pins the module
# at this version; testbed/tools/tools_test.go checks they agree).
KUEUE_VERSION=v0.17.0
# Karpenter's core with its kwok cloud provider, the autoscaler of the simulated GPU pools that
# start at zero (testbed/tools/karpenter pins the module at this version; v1.13.0 is the newest
# whose go.mod asks for no newer Go than the machine's 1.26.8; tools_test.go checks they agree).
KARPENTER_VERSION=v1.13.0
# Cilium's agent and CNI plugin, the real node's network and NetworkPolicy enforcer in the e2e suite
# (testbed/tools/cilium pins the module at this version; v1.18.4 and later replace
# k8s.io/apimachinery with a fork the module proxy does not serve; tools_test.go checks they agree).
CILIUM_VERSION=v1.18.3
# The real Kubernetes provider: the release whose commit testbed/tools/kubernetes/go.mod pins (the
# module proxy serves it only as the pseudo-version of that commit, v4.25.0's). The product's
# go.mod pins the Kubernetes SDK at the same release, so the CLI expects no newer plugin
# (testbed/tools/tools_test.go checks both).
KUBERNETES_PROVIDER_VERSION=v4.25.0

# on_path BINARY WANT VERSION-COMMAND...: true when BINARY is on PATH (outside .kolotoc/bin) and
# its version output contains WANT; then it is linked as it is.
on_path() {
  local name=$1 want=$2; shift 2
  local found
  found=$(PATH=$(path_without "$bin_dir") command -v "$name" 2>/dev/null) || return 1
  local out
  out=$("$found" "$@" 2>/dev/null) || return 1  # not piped into grep -q: SIGPIPE under pipefail
  [[ $out == *"$want"* ]] || return 1
  ln -sfn "$found" "$bin_dir/$name"
  log "$name $want found on PATH at $found"
}

# go_bin_name PKG: the file go build -o DIR/ writes for package PKG: its last path element, or the
# one before it when that is a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
go_bin_name() {
  local pkg=$1 base=${1##*/}
  if [[ $base =~ ^v[0-9]+$ && $pkg == */*/* ]]; then
    pkg=${pkg%/*}
    base=${pkg##*/}
  fi
  printf '%s\n' "$base"
}

# build TOOL VERSION MINUTES LDFLAGS PKG=BIN...: builds each package of testbed/tools/TOOL into the
# cache unless every binary is already there. MINUTES is the cold build measured on 2 cores (all
# of them together: docs/measured.md, the one place the figures are kept).
build() {
  local tool=$1 version=$2 minutes=$3 ldflags=$4; shift 4
  local dest=$tools_dir/$tool-$version missing=() pair lock=''
  for pair in "$@"; do
    [ -x "$dest/${pair#*=}" ] || missing+=("$pair")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # One build per tool at a time: make test starts the cluster's tools in the background while
    # the unit tests run, and asks for them again afterwards; the second call waits here for the
    # first and finds them built.
    mkdir -p "$dest"
    exec {lock}>"$dest.lock"
    flock "$lock"
    missing=()
    for pair in "$@"; do
      [ -x "$dest/${pair#*=}" ] || missing+=("$pair")
    done
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    log "building $tool $version (about $minutes min on 2 cores, once per machine) into $dest"
    mkdir -p "$dest"
    local start=$SECONDS tmp pkgs=()
    # One go build for every missing binary: the packages they share are compiled once and the
    # links run in parallel (kube's six binaries share most of Kubernetes).
    tmp=$(mktemp -d "$dest/.build.XXXXXX")
    for pair in "${missing[@]}"; do pkgs+=("${pair%=*}"); done
    (cd "$modules/$tool" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}") \
      || { rm -rf "$tmp"; return 1; }
    for pair in "${missing[@]}"; do mv "$tmp/$(go_bin_name "${pair%=*}")" "$dest/${pair#*=}"; done
    rm -rf "$tmp"
    log "built $tool $version in $((SECONDS - start)) s"
  fi
  if [ -n "${lock:-}" ]; then exec {lock}>&-; fi
  # Linked into .kolotoc/bin (on PATH) unless the caller set link_dir empty (plugins: below).
  if [ -n "${link_dir-$bin_dir}" ]; then
    for pair in "$@"; do ln -sfn "$dest/${pair#*=}" "${link_dir-$bin_dir}/${pair#*=}"; done
  fi
}

# The CLI warns "using <plugin> from $PATH" on every command for a plugin it finds on PATH, unless
# it is a language host bundled beside the pulumi binary itself. So no plugin goes on PATH: the
# Go language host is put beside the CLI (a hard link, so that the path the CLI resolves is the
# bundled one), and the Kubernetes provider goes into each PULUMI_HOME's plugin cache
# (--install-plugins), where the CLI finds it by the version the program's SDK asks for.
bundle_langhost() {
  local cli=$tools_dir/pulumi-$PULUMI_VERSION host=$tools_dir/langhost-$LANGHOST_VERSION/pulumi-language-go
  if [ -x "$cli/pulumi" ] && [ -x "$host" ]; then ln -f "$host" "$cli/pulumi-language-go"; fi
  rm -f "$bin_dir/pulumi-language-go"
}

# install_plugins HOME: the Kubernetes provider into HOME's plugin cache, as `pulumi plugin
# install` would put it (a directory per kind, name and version), the binary a link to the tool
# cache's (308 MB: not copied into every throw-away PULUMI_HOME).
install_plugins() {
  local home=$1 bin=$tools_dir/kubernetes-$KUBERNETES_PROVIDER_VERSION/pulumi-resource-kubernetes
  [ -x "$bin" ] || { log "the Kubernetes provider is not built: testbed/tools/tools.sh kubernetes"; return 1; }
  local dir=$home/plugins/resource-kubernetes-$KUBERNETES_PROVIDER_VERSION
  mkdir -p "$dir"
  ln -sfn "$bin" "$dir/pulumi-resource-kubernetes"
}

tool_pulumi() {
  on_path pulumi "$PULUMI_VERSION" version && return
  build pulumi "$PULUMI_VERSION" 6 \
    "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi=pulumi
  bundle_langhost
}

tool_langhost() {
  # The old language host reports no version of its own; the cache key pins it.
  link_dir='' build langhost "$LANGHOST_VERSION" 1 "-s -w" \
    github.com/pulumi/pulumi/sdk/v3/go/pulumi-language-go=pulumi-language-go
  bundle_langhost
}

tool_etcd() {
  on_path etcd "etcd Version: ${ETCD_VERSION#v}" --version && return
  build etcd "$ETCD_VERSION" 3 "-s -w" go.etcd.io/etcd/server/v3=etcd
}

tool_kube() {
  local v=${KUBE_VERSION#v} flags="-s -w" p
  local major=${v%%.*} minor=${v#*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  if on_path kube-apiserver "$KUBE_VERSION" --version && on_path kube-controller-manager "$KUBE_VERSION" --version \
    && on_path kube-scheduler "$KUBE_VERSION" --version && on_path kubectl "$KUBE_VERSION" version --client \
    && on_path kubelet "$KUBE_VERSION" --version && on_path kube-proxy "$KUBE_VERSION" --version; then
    return
  fi
  # The control plane, kubectl, and the real node's kubelet and kube-proxy: one build.
  build kube "$KUBE_VERSION" 12 "$flags" \
    k8s.io/kubernetes/cmd/kube-apiserver=kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager=kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler=kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl=kubectl \
    k8s.io/kubernetes/cmd/kubelet=kubelet \
    k8s.io/kubernetes/cmd/kube-proxy=kube-proxy
}

# CoreDNS for the real node's cluster DNS, with only the plugins it needs (testbed/tools/coredns).
tool_coredns() {
  build coredns "$COREDNS_VERSION" 2 "-s -w" kolotoc.dev/testbed/tools/coredns=coredns
}

tool_kwok() {
  on_path kwokctl "$KWOK_VERSION" --version && on_path kwok "$KWOK_VERSION" --version && return
  local flags="-s -w"  # kwok stamps its own version (pkg/consts)
  build kwok "$KWOK_VERSION" 3 "$flags" sigs.k8s.io/kwok/cmd/kwok=kwok sigs.k8s.io/kwok/cmd/kwokctl=kwokctl
}

# actionlint checks the GitHub Actions workflows users run (.github/workflows): syntax, expressions,
# the inputs of the actions they use, and their shell steps through shellcheck when it is installed.
tool_actionlint() {
  on_path actionlint "$ACTIONLINT_VERSION" -version && return
  build actionlint "$ACTIONLINT_VERSION" 1 "-s -w" github.com/rhysd/actionlint/cmd/actionlint=actionlint
}

# staticcheck lints the Go modules (make lint, which make unit runs): bugs go vet does not look for,
# dead code, deprecated APIs.
tool_staticcheck() {
  on_path staticcheck "${STATICCHECK_VERSION#v}" -version && return
  build staticcheck "$STATICCHECK_VERSION" 2 "-s -w" honnef.co/go/tools/cmd/staticcheck=staticcheck
}

# The real Kubernetes provider plugin (testbed/tools/kubernetes: the upstream module, pinned; a main
# that serves it). Upstream's command embeds its schema and Terraform mapping, which the module
# ships as cmd/pulumi-resource-kubernetes/{schema,terraform-mapping}.json: they are copied beside
# the wrapper's main before the build (git-ignored there). About 14 CPU-minutes cold, 5 GB peak.
tool_kubernetes() {
  local dir=$modules/kubernetes mod
  if [ ! -x "$tools_dir/kubernetes-$KUBERNETES_PROVIDER_VERSION/pulumi-resource-kubernetes" ]; then
    mod=$(module_dir kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4)
    [ -n "$mod" ] || { log "could not find the provider's module (go mod download in $dir)"; return 1; }
    install -m 0644 "$mod/cmd/pulumi-resource-kubernetes/schema.json" "$mod/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$dir/"
  fi
  rm -f "$bin_dir/pulumi-resource-kubernetes"
  link_dir='' build kubernetes "$KUBERNETES_PROVIDER_VERSION" 8 \
    "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${KUBERNETES_PROVIDER_VERSION#v}" \
    kolotoc.dev/testbed/tools/kubernetes=pulumi-resource-kubernetes
}

# Kueue (testbed/tools/kueue: the upstream module, pinned), run by testbed/cluster/cluster.sh inside
# the cluster's network namespace; and kueuelocal (testbed/cluster/kueuelocal, this module), which
# prepares its CRDs, loopback webhooks, certificates and configuration from the same module.
# Measured cold on 2 cores (an empty GOCACHE): see docs/queueing.md.
tool_kueue() {
  build kueue "$KUEUE_VERSION" 6 "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    sigs.k8s.io/kueue/cmd/kueue=kueue
  (cd "$root" && go build -trimpath -o "$bin_dir/kueuelocal" ./testbed/cluster/kueuelocal)
}

# Karpenter (testbed/tools/karpenter: the upstream module, pinned; its kwok/ main, upstream's kwok
# cloud provider), run by testbed/cluster/cluster.sh inside the cluster's network namespace. Its
# CRDs and the instance types of Kolotoc's catalogue are applied by cluster.sh from the module and
# testbed/cluster/karpenter/.
tool_karpenter() {
  build karpenter "$KARPENTER_VERSION" 10 "-s -w" sigs.k8s.io/karpenter/kwok=karpenter
}

# Cilium (testbed/tools/cilium: the upstream module, pinned), the real node's CNI and NetworkPolicy
# enforcer (testbed/node/node.sh, KOLOTOC_NETWORK=cilium): the agent and the CNI plugin, and beside
# them the datapath's C sources (the module's bpf/), which the agent compiles at run time with
# Debian's clang-19 (node.sh packages). osusergo: the agent's user lookups in Go, as upstream's
# images build it. About 10 CPU-minutes cold, 3.4 GB peak (docs/measured.md).
tool_cilium() {
  local dest=$tools_dir/cilium-$CILIUM_VERSION mod lock
  GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=osusergo" build cilium "$CILIUM_VERSION" 6 \
    "-s -w -X github.com/cilium/cilium/pkg/version.ciliumVersion=${CILIUM_VERSION#v}" \
    github.com/cilium/cilium/daemon=cilium-agent github.com/cilium/cilium/plugins/cilium-cni=cilium-cni
  exec {lock}>"$dest.lock"
  flock "$lock"
  if [ ! -f "$dest/lib/bpf/bpf_lxc.c" ]; then
    mod=$(module_dir cilium github.com/cilium/cilium)
    [ -n "$mod" ] || { log "could not find Cilium's module (go mod download in $modules/cilium)"; return 1; }
    rm -rf "$dest/lib.tmp" && mkdir -p "$dest/lib.tmp"
    cp -r "$mod/bpf" "$dest/lib.tmp/" && chmod -R u+w "$dest/lib.tmp"
    rm -rf "$dest/lib" && mv "$dest/lib.tmp" "$dest/lib"
  fi
  exec {lock}>&-
}

# module_dir TOOL MODULE: the directory of MODULE, as the wrapper module of TOOL pins it, in the
# module cache (downloaded when missing).
module_dir() {
  (cd "$modules/$1" && go mod download -json "$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

# nsbridge, the one door from the host's loopback into the cluster's network namespace
# (testbed/cluster/nsbridge, stdlib only): built from this checkout every time, a no-op when
# unchanged.
tool_nsbridge() {
  (cd "$root" && go build -trimpath -o "$bin_dir/nsbridge" ./testbed/cluster/nsbridge)
}

# flowcheck, the e2e suite's NetworkPolicy judge (testbed/checks/flowcheck: cyclonus's matcher, in
# a module of its own): built from this checkout every time, a no-op when unchanged.
tool_flowcheck() {
  (cd "$testbed/checks/flowcheck" && go build -trimpath -o "$bin_dir/flowcheck" .)
}

# simpool, the simulated cloud's node-pool controller (testbed/cluster/simpool, this module): built
# from this checkout every time, a no-op when unchanged.
tool_simpool() {
  (cd "$root" && go build -trimpath -o "$bin_dir/simpool" ./testbed/cluster/simpool)
}

if [ "${1:-}" = "--path" ]; then
  echo "$bin_dir"
  exit 0
fi
if [ "${1:-}" = "--install-plugins" ]; then
  [ $# -eq 2 ] || { log "usage: testbed/tools/tools.sh --install-plugins PULUMI_HOME"; exit 2; }
  install_plugins "$2"
  exit 0
fi
if [ "${1:-}" = "--kueue-module" ]; then # for testbed/cluster/cluster.sh
  module_dir kueue sigs.k8s.io/kueue
  exit 0
fi
if [ "${1:-}" = "--karpenter-module" ]; then # for testbed/cluster/cluster.sh
  module_dir karpenter sigs.k8s.io/karpenter
  exit 0
fi
if [ "${1:-}" = "--cilium-module" ]; then # for testbed/node/node.sh (its CRDs)
  module_dir cilium github.com/cilium/cilium
  exit 0
fi
if [ "${1:-}" = "--bin-name" ]; then # for testbed/tools/tools_test.go
  go_bin_name "$2"
  exit 0
fi
[ $# -gt 0 ] || set -- pulumi langhost etcd kwok kube coredns nsbridge simpool kueue karpenter cilium flowcheck actionlint staticcheck kubernetes
for t in "$@"; do
  case $t in
    pulumi|langhost|etcd|kube|kwok|coredns|nsbridge|simpool|kueue|karpenter|cilium|flowcheck|actionlint|staticcheck|kubernetes) "tool_$t" ;;
    *) log "unknown tool $t (pulumi langhost etcd kube kwok coredns nsbridge simpool kueue karpenter cilium flowcheck actionlint staticcheck kubernetes)"; exit 2 ;;
  esac
done
