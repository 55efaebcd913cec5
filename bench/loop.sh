#!/usr/bin/env bash
# How long the program's own loop takes on a deployed stack with nothing to change: RUNS times
# each of
#   testbed/stack/stack.sh preview  what `make preview` runs once its tools and cluster are checked
#   testbed/stack/stack.sh up       a `pulumi up` (with its preview) that changes nothing, and the
#                                   outputs
#   make preview                    the whole target, its tools and cluster checks included
# It prints every time and the median, as a Markdown table, and fails when the stack was not up
# to date (an up that changed something measures something else).
#
#   make bench-loop [STACK=dev] [RUNS=5]      (the stack deployed: make up)
set -euo pipefail

log_tag=bench/loop
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../testbed/lib.sh" # root, die, median
cd "$root"
stack=${STACK:-dev}
runs=${RUNS:-5}
log=$root/.kolotoc/bench/loop.log
mkdir -p "$(dirname "$log")"
: >"$log"

# timed NAME CMD...: runs CMD with its output in the log, prints its wall time in seconds.
timed() {
  local name=$1 start end
  shift
  echo "\$ $*" >>"$log"
  start=$EPOCHREALTIME
  "$@" >>"$log" 2>&1 || die "$name failed (log: $log)"
  end=$EPOCHREALTIME
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f\n", b - a }'
}


# The stack must be deployed and current: a first up, or one that changes something, is not the
# loop being measured.
out=$(STACK=$stack testbed/stack/stack.sh preview 2>&1) || die "testbed/stack/stack.sh preview failed: is the cluster up and stack $stack deployed (make up)?"$'\n'"$out"
if grep -Eq '^ +[-+~]|to (create|update|replace|delete)' <<<"$out"; then
  die "stack $stack has changes to apply: run make up first"$'\n'"$(tail -n 5 <<<"$out")"
fi

declare -A times
for cmd in stack-preview stack-up make-preview; do times[$cmd]=""; done
for _ in $(seq "$runs"); do
  times[stack-preview]+="$(STACK=$stack timed "testbed/stack/stack.sh preview" testbed/stack/stack.sh preview) "
  times[stack-up]+="$(STACK=$stack timed "testbed/stack/stack.sh up" testbed/stack/stack.sh up) "
  times[make-preview]+="$(timed "make preview" make --no-print-directory preview STACK="$stack") "
done
if grep -Eq '^ +[-+~] |[0-9]+ (created|updated|replaced|deleted)$' "$log"; then
  die "an up changed something: the figures are not of a no-change loop (log: $log)"
fi

echo "| $stack, $runs runs | times (s) | median (s) |"
echo "|---|---|---:|"
for cmd in stack-preview stack-up make-preview; do
  # shellcheck disable=SC2016 # the backquotes are Markdown
  case $cmd in
    stack-preview) what='`testbed/stack/stack.sh preview`' ;;
    stack-up) what='`testbed/stack/stack.sh up`, nothing to change' ;;
    make-preview) what='`make preview` (tools and cluster checked first)' ;;
  esac
  # shellcheck disable=SC2086
  echo "| $what | ${times[$cmd]% } | $(printf '%s\n' ${times[$cmd]} | median) |"
done
