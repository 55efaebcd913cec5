#!/bin/sh
# Runs inside the rootfs at build time (hack/images.sh). Debian's PyTorch 1.13 on Python 3.11:
# iterating an IntFlag no longer yields its zero and multi-bit members, so torchrun's
# Std.from_str("0") (its default --redirects and --tee) returns None and every torchrun dies in
# start_processes. Iterate the enum's members instead, as later PyTorch releases do.
set -eu
f=/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py
grep -q '            for s in Std:$' "$f" || { echo "torch: Std.from_str is not the expected code; recheck the patch" >&2; exit 1; }
sed -i 's/^            for s in Std:$/            for s in Std.__members__.values():/' "$f"
