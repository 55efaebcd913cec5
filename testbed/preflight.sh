#!/usr/bin/env bash
# What the test bed needs of this machine, checked in seconds before any build starts: the first
# step of make up, make cluster, make test and make e2e. Each failure names its cause and its fix;
# every check runs, so one run lists every problem. Exit 0 when the machine can run the test bed.
#
#   testbed/preflight.sh [TARGET]   (make preflight; TARGET, the make target it guards, for the advice)
#
# Checked: root (network namespaces, mounts, containerd, cgroups need it; how to keep Go and the
# caches under sudo), the cgroup filesystem, free disk where the builds and images go, Debian's
# package manager (the real node's packages come from it), network namespaces and overlayfs, and
# a Docker installation whose containerd (Docker's containerd.io package) Debian's containerd
# package would remove.
#
# KOLOTOC_PREFLIGHT_MIN_GB (default 15) is the free disk it asks for, in GB, on the filesystems of
# the checkout and of the caches (docs/measured.md gives what a cold make up and make test write).
set -uo pipefail

log_tag=preflight
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/lib.sh"

min_gb=${KOLOTOC_PREFLIGHT_MIN_GB:-15}
target=${1:-up}
problems=0
fail() { log "FAIL: $*"; problems=$((problems + 1)); }

# Root: everything below needs it, so a user who is not root learns it now, not after the builds.
if [ "$(id -u)" != 0 ]; then
  fail "not root (uid $(id -u)): the local cluster runs in network namespaces with a real kubelet and containerd, which need root.
  Run it as root with your Go and caches kept:
    sudo env PATH=\"\$PATH\" HOME=\"\$HOME\" GOPATH=\"\$(go env GOPATH)\" GOCACHE=\"\$(go env GOCACHE)\" GOMODCACHE=\"\$(go env GOMODCACHE)\" make $target
  (or in a root shell, or a root container with --privileged)"
fi

# The cgroup filesystem: the kubelet and containerd put every pod in a cgroup.
if ! grep -qE ' /sys/fs/cgroup(/[a-z_,]+)? (cgroup2?|tmpfs) ' /proc/self/mounts; then
  fail "no cgroup filesystem under /sys/fs/cgroup: the real node's kubelet needs one (cgroup v1 or v2); mount it, or run on a machine (or a --privileged container) that has it"
fi

# Free disk on the filesystems the builds and the images write to (each filesystem once).
seen=" "
for dir in "$root" "$cache_dir" "${GOCACHE:-$(go env GOCACHE 2>/dev/null || echo "$HOME/.cache/go-build")}"; do
  probe=$dir
  while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
  read -r mnt free_kb < <(df -Pk "$probe" | awk 'NR == 2 { print $6, $4 }')
  case $seen in *" $mnt "*) continue ;; esac
  seen="$seen$mnt "
  if [ -n "$free_kb" ] && [ "$((free_kb / 1024 / 1024))" -lt "$min_gb" ]; then
    fail "$((free_kb / 1024 / 1024)) GB free on $mnt (where $dir is), want at least $min_gb GB for the Go build cache, the tools, the node's images and containerd's root: free some (e.g. go clean -cache), or set KOLOTOC_PREFLIGHT_MIN_GB lower at your own risk"
  fi
done

# Debian's packages: containerd, runc, the CNI plugins, mmdebstrap (testbed/node/node.sh packages).
if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  fail "no apt-get/dpkg-query: the real node's packages (containerd, runc, CNI plugins, mmdebstrap) come from Debian's archive; run on Debian or Ubuntu (the test bed is built and tested on Debian bookworm)"
fi

# Network namespaces and overlayfs: the cluster's own network, and containerd's image layers.
if [ "$(id -u)" = 0 ]; then
  ns=kolotoc-preflight-$$
  if ! ip netns add "$ns" 2>/dev/null; then
    fail "cannot create a network namespace (ip netns add): the local cluster lives in one; the kernel needs CONFIG_NET_NS, and a container needs --privileged (or CAP_SYS_ADMIN and CAP_NET_ADMIN)"
  else
    ip netns del "$ns" 2>/dev/null || true
  fi
fi
if ! grep -qw overlay /proc/filesystems && ! { [ "$(id -u)" = 0 ] && modprobe overlay 2>/dev/null; }; then
  fail "no overlay filesystem (/proc/filesystems): containerd's snapshotter needs it; load the module (modprobe overlay)"
fi

# Docker: Debian's containerd package conflicts with Docker's containerd.io and would remove it
# (and with it Docker's daemon) when make up installs the node's packages.
if command -v dpkg-query >/dev/null &&
  dpkg-query -W -f='${Status}' containerd.io 2>/dev/null | grep -q 'install ok installed' &&
  ! dpkg-query -W -f='${Status}' containerd 2>/dev/null | grep -q 'install ok installed'; then
  fail "Docker's containerd.io is installed: the real node installs Debian's containerd package, which conflicts with it and would remove Docker's containerd (and stop Docker). Run the test bed on a machine or VM without Docker's packages, or in a --privileged container"
fi

if [ "$problems" -gt 0 ]; then
  log "$problems problem(s): the test bed cannot run here (nothing was built or changed)"
  exit 1
fi
log "ok: root, cgroups, ${min_gb}+ GB free, Debian packages, network namespaces, overlayfs"
