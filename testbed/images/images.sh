#!/usr/bin/env bash
# Builds the real node's container images from Debian packages, with no image registry.
#
# testbed/images/images.sh COMMAND:
#   build [NAME...]          build what is missing (all images when none is named)
#   ref NAME                 print the image reference, kolotoc.local/NAME:TAG
#   path NAME                print the image's tarball path in the cache
#   list                     print "NAME REF PATH" per image
#   needs FILE...            print the images the stack files name (kolotoc.local/NAME:…), with
#                            pause (the node's own), one a line: what a stack's real pods run
#   import SOCKET [NAME...]  import the built images into the containerd at unix socket SOCKET
#                            (namespace k8s.io), skipping those present
#
# Recipes. Every directory testbed/images/NAME/ holding a config.json is an image; adding one is
# adding a directory. config.json is the OCI image config fragment (Entrypoint, Cmd, Env,
# WorkingDir, User, ...). Then either
#   - packages: Debian package names, one a line, '#' comments. The rootfs is `mmdebstrap
#     --variant=essential` of the suite $KOLOTOC_IMAGES_SUITE (bookworm) with those packages, no
#     recommends, no docs/man/locales (copyrights kept), no apt lists or caches, and the host's
#     /etc/resolv.conf and /etc/hostname removed. Packages come from the host's own apt sources
#     (/etc/apt/sources.list and sources.list.d/*.list|*.sources, or the files named in
#     $KOLOTOC_APT_SOURCES), which must serve that suite. Optional: files/, a tree copied to / (owned
#     by root), then setup.sh, run by /bin/sh chrooted in the rootfs; and user, a line "NAME UID":
#     an account NAME with that uid and the group NAME of the same number, home /home/NAME (made,
#     owned by it), shell /bin/bash, no password (the workloads' user, kolotoc:runAsUser);
#   - or go.mod: a Go main package, built static (CGO_ENABLED=0) as /NAME, the image's only file;
#     with a file go-build holding "PACKAGE PATH", the main package PACKAGE (of a module the
#     recipe's go.mod requires, pinned by its go.sum) is built as PATH instead.
#
# Tag = the first 12 hex digits of the SHA-256 of the recipe directory: for each regular file under
# testbed/images/NAME/, in byte-wise sorted order of its path relative to that directory (slash
# separated, no leading ./), the bytes <relpath> NUL <file content> NUL. (testbed/images/tag_test.go
# recomputes it.) Ref = kolotoc.local/NAME:TAG. The image is an OCI image-layout tarball (one gzip
# layer; index.json annotated with io.containerd.image.name = the ref) at
#   ${KOLOTOC_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kolotoc}/images/NAME-TAG.tar
# written under a temporary name and renamed, so a killed build leaves no partial image. A built
# image is never rebuilt; changing its recipe changes its tag. Needs root for mmdebstrap (installed
# with apt-get when missing), Go for the OCI writer (testbed/images/ocitar/) and Go recipes, and ctr
# (Debian's containerd package) for import. Logs go to stderr as [images] lines.
#
# The mmdebstrap hooks below are single-quoted on purpose: sh expands them, with the rootfs as $1.
# shellcheck disable=SC2016
set -euo pipefail

log_tag=images
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../lib.sh"
recipes=${KOLOTOC_IMAGES_DIR:-$testbed/images}   # another recipe directory: for tests
cache=$cache_dir/images
registry=kolotoc.local
suite=${KOLOTOC_IMAGES_SUITE:-bookworm}

# indent: a command's output as [images] lines.
indent() { sed 's/^/[images]   /' >&2; }
now() { printf '%s' "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
mb() { awk -v n="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MB", n / 1e6 }'; }

# names: every recipe, sorted.
names() {
  local d
  for d in "$recipes"/*/; do
    [ -f "$d/config.json" ] && basename "$d"
  done | LC_ALL=C sort
}

check() {
  if ! [[ $1 =~ ^[a-z0-9]+([._-][a-z0-9]+)*$ ]] || [ ! -f "$recipes/$1/config.json" ]; then
    die "no image '$1' (images: $(names | paste -sd' ' -))"
  fi
}

tag() {
  (
    cd "$recipes/$1"
    find . -type f -printf '%P\0' | LC_ALL=C sort -z | while IFS= read -r -d '' f; do
      printf '%s\0' "$f"
      cat -- "$f"
      printf '\0'
    done
  ) | sha256sum | cut -c1-12
}

# ref NAME TAG, path NAME TAG
ref() { printf '%s/%s:%s' "$registry" "$1" "$2"; }
path() { printf '%s/%s-%s.tar' "$cache" "$1" "$2"; }

# apt_sources: the host's apt source files, handed to mmdebstrap, which pastes them into the
# rootfs's apt configuration.
apt_sources() {
  local f
  if [ -n "${KOLOTOC_APT_SOURCES:-}" ]; then
    for f in $KOLOTOC_APT_SOURCES; do printf '%s\n' "$f"; done
    return
  fi
  if grep -qsv '^[[:space:]]*\(#.*\)\?$' /etc/apt/sources.list; then echo /etc/apt/sources.list; fi
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && printf '%s\n' "$f"
  done
}

need_mmdebstrap() {
  command -v mmdebstrap >/dev/null && return
  [ "$(id -u)" = 0 ] || die "mmdebstrap is missing: apt-get install mmdebstrap (as root)"
  log "installing mmdebstrap with apt-get"
  { apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends mmdebstrap ||
    { apt-get update -o DPkg::Lock::Timeout=600 && apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends mmdebstrap; }; } \
    >/dev/null 2>&1 || die "apt-get install mmdebstrap failed"
}

# rootfs_debian NAME TMP: the rootfs tar of a package recipe, as TMP/rootfs.tar.
rootfs_debian() {
  local name=$1 tmp=$2 dir=$recipes/$1 pkgs sources=()
  need_mmdebstrap
  [ "$(id -u)" = 0 ] || die "$name: building a Debian image needs root (mmdebstrap)"
  pkgs=$(sed -e 's/#.*//' "$dir/packages" | tr -s ' \t\n' ',' | sed -e 's/^,//' -e 's/,$//')
  [ -n "$pkgs" ] || die "$name: $dir/packages lists no package"
  mapfile -t sources < <(apt_sources)
  [ ${#sources[@]} -gt 0 ] || die "no apt sources on this host (set KOLOTOC_APT_SOURCES)"
  local args=(
    --variant=essential --include="$pkgs" --aptopt='Apt::Install-Recommends "false"'
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
    --dpkgopt='path-exclude=/usr/share/lintian/*'
    --customize-hook='rm -f "${1:?}/etc/resolv.conf" "$1/etc/hostname"'
  )
  # Hooks run by sh with the rootfs as $1; they find the recipe in $KOLOTOC_RECIPE.
  if [ -d "$dir/files" ]; then
    args+=(--customize-hook='tar -C "$KOLOTOC_RECIPE/files" --owner=0 --group=0 --numeric-owner -cf - . | tar -C "${1:?}" --no-overwrite-dir -xf -')
  fi
  if [ -f "$dir/user" ]; then
    args+=(--customize-hook='read -r u id <"$KOLOTOC_RECIPE/user" && r=${1:?} &&
      echo "$u:x:$id:$id:Kolotoc workloads:/home/$u:/bin/bash" >>"$r/etc/passwd" &&
      echo "$u:x:$id:" >>"$r/etc/group" && echo "$u:*:19000:0:99999:7:::" >>"$r/etc/shadow" &&
      mkdir -m 755 "$r/home/$u" && chown "$id:$id" "$r/home/$u"')
  fi
  if [ -f "$dir/setup.sh" ]; then
    args+=(--customize-hook='cp "$KOLOTOC_RECIPE/setup.sh" "${1:?}/kolotoc-setup.sh" && chroot "$1" /bin/sh /kolotoc-setup.sh >&2 && rm "$1/kolotoc-setup.sh"')
  fi
  # mmdebstrap then removes the apt lists and caches, /tmp and /run. Never touch the rootfs's /tmp
  # in a hook: mmdebstrap keeps its apt configuration there, and without it, its cleanup's
  # `apt-get update` and `apt-get clean` run on the HOST's apt state (seen: the host's lists wiped).
  args+=(--customize-hook='rm -rf "${1:?}"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old "$1"/var/cache/ldconfig/*')
  KOLOTOC_RECIPE=$dir mmdebstrap "${args[@]}" --logfile="$tmp/mmdebstrap.log" \
    "$suite" "$tmp/rootfs.tar" "${sources[@]}" </dev/null >"$tmp/mmdebstrap.out" 2>&1 || {
    log "$name: mmdebstrap failed; the end of its log:"
    tail -n 30 "$tmp/mmdebstrap.log" "$tmp/mmdebstrap.out" 2>/dev/null | indent
    return 1
  }
}

# rootfs_go NAME TMP: a rootfs holding only the recipe's static binary: /NAME, or what go-build
# says.
rootfs_go() {
  local name=$1 tmp=$2 out pkg=.
  # Its own `local`: in the one above, $name would still be the caller's (it is the same name
  # today, by luck of the caller's variable of the same name).
  local bin=/$name
  if [ -f "$recipes/$name/go-build" ]; then
    read -r pkg bin <"$recipes/$name/go-build"
    [[ -n $pkg && $bin == /* ]] || die "$name: go-build must hold \"PACKAGE /PATH\""
  fi
  mkdir -m 755 "$tmp/rootfs"
  mkdir -p "$tmp/rootfs$(dirname "$bin")"
  out=$(cd "$recipes/$name" && CGO_ENABLED=0 GOOS=linux GOWORK=off \
    go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$tmp/rootfs$bin" "$pkg" 2>&1) || {
    log "$name: go build failed:"; printf '%s\n' "$out" | indent; return 1
  }
  tar -C "$tmp/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -cf "$tmp/rootfs.tar" .
}

build_one() {
  local name=$1 tag dest ref tmp start t1 summary
  tag=$(tag "$name")
  dest=$(path "$name" "$tag") ref=$(ref "$name" "$tag")
  [ -f "$dest" ] && return 0
  command -v go >/dev/null || die "go is missing (the OCI writer testbed/images/ocitar is Go)"
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.build-$name.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  trap 'exit 130' INT TERM
  log "$name: building $ref"
  start=$(now)
  if [ -f "$recipes/$name/packages" ]; then
    rootfs_debian "$name" "$tmp"
  elif [ -f "$recipes/$name/go.mod" ]; then
    rootfs_go "$name" "$tmp"
  else
    die "$name: the recipe has neither packages nor go.mod"
  fi
  t1=$(now)
  summary=$(cd "$root" && GOWORK=off go run ./testbed/images/ocitar -config "$recipes/$name/config.json" \
    -ref "$ref" -out "$tmp/image.tar" <"$tmp/rootfs.tar" 2>&1) || {
    log "$name: writing the OCI image failed:"; printf '%s\n' "$summary" | indent; return 1
  }
  mv -f "$tmp/image.tar" "$dest"
  # Earlier builds of this image (other recipe contents) are never used again.
  find "$cache" -maxdepth 1 -name "$name-*.tar" ! -path "$dest" -delete
  log "$name: built in $(since "$start") s (rootfs $(awk -v a="$start" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, image $(since "$t1") s): $summary, tarball $(mb "$dest")"
  rm -rf "$tmp"
  trap - EXIT INT TERM
}

cmd_build() {
  local name all
  if [ $# -eq 0 ]; then mapfile -t all < <(names); set -- "${all[@]}"; fi
  for name in "$@"; do check "$name"; done
  # One build at a time per cache: `make test` starts one in the background while the Go code
  # compiles, and testbed/node/node.sh's own build then waits here and finds the images built.
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock 9
  for name in "$@"; do build_one "$name"; done
}

cmd_import() {
  [ $# -ge 1 ] || die "usage: testbed/images/images.sh import SOCKET [NAME...]"
  local sock=$1 name tag ref dest present start t0 all out missing=0; shift
  if [ $# -eq 0 ]; then mapfile -t all < <(names); set -- "${all[@]}"; fi
  for name in "$@"; do check "$name"; done
  command -v ctr >/dev/null || die "ctr is missing (Debian's containerd package)"
  present=$(ctr --address "$sock" -n k8s.io images ls -q 2>&1) || die "cannot list images at $sock: $present"
  t0=$(now)
  for name in "$@"; do
    tag=$(tag "$name")
    ref=$(ref "$name" "$tag") dest=$(path "$name" "$tag")
    if grep -qxF "$ref" <<<"$present"; then
      log "$name: $ref already present"
    elif [ ! -f "$dest" ]; then
      log "$name: $ref is not built (testbed/images/images.sh build $name)"; missing=1
    else
      start=$(now)
      out=$(ctr --address "$sock" -n k8s.io images import "$dest" 2>&1) || {
        log "$name: import failed:"; printf '%s\n' "$out" | indent; return 1
      }
      log "$name: imported $ref in $(since "$start") s"
    fi
  done
  log "import done in $(since "$t0") s"
  return "$missing"
}

# cmd_needs FILE...: pause, and each recipe a stack file names as kolotoc.local/NAME:TAG.
cmd_needs() {
  [ $# -gt 0 ] || die "usage: testbed/images/images.sh needs FILE..."
  {
    echo pause
    sed -n "s|.*$registry/\([a-z0-9][a-z0-9_-]*\):.*|\1|p" "$@"
  } | sort -u | while read -r name; do
    if [ -f "$recipes/$name/config.json" ]; then echo "$name"; fi
  done
}

main() {
  case ${1:-} in
    build) shift; cmd_build "$@" ;;
    ref) [ $# -eq 2 ] || die "usage: testbed/images/images.sh ref NAME"; check "$2"; ref "$2" "$(tag "$2")"; echo ;;
    path) [ $# -eq 2 ] || die "usage: testbed/images/images.sh path NAME"; check "$2"; path "$2" "$(tag "$2")"; echo ;;
    list)
      names | while read -r name; do
        t=$(tag "$name"); printf '%s %s %s\n' "$name" "$(ref "$name" "$t")" "$(path "$name" "$t")"
      done ;;
    import) shift; cmd_import "$@" ;;
    needs) shift; cmd_needs "$@" ;;
    *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}

# One line, read whole before it runs: editing this file during a build cannot derail it.
main "$@"; exit
