#!/bin/sh
# Runs inside the rootfs at build time (hack/images.sh). Kolotoc's etcd members run
# /usr/local/bin/etcd, where the upstream image has it; Debian installs /usr/bin/etcd.
set -eu
ln -s /usr/bin/etcd /usr/local/bin/etcd
