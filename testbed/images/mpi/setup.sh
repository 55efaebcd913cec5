#!/bin/sh
# Runs inside the rootfs at build time (hack/images.sh). openssh-server's postinst generated host
# keys: drop them, so that no two towers share a key; the tower's entrypoint runs ssh-keygen -A.
set -eu
rm -f /etc/ssh/ssh_host_*
