#!/usr/bin/env bash
# What queueing through Kueue adds to a first `pulumi up` of the dev stack, side by side: RUNS
# times, a fresh up of Pulumi.dev.yaml as committed (no queue), then of the same file with
# kolotoc:queue {type: kueue} (its ring admitted by the local cluster's Kueue), each destroyed
# after. For each it prints, from the start of the up:
#   up        when `testbed/stack/stack.sh up` returned (with the queue, up does not await the
#             towers: a queued ring may wait for quota)
#   towers    when every tower pod was Ready
#   launcher  when the launcher Job (the run, mpirun over the towers) completed
# and the medians, as a Markdown table. The queued copy is a temporary stack, Pulumi.benchq.yaml,
# removed with its state at the end.
#
#   make bench-queue [RUNS=5]      (the local cluster up: make cluster, or make up)
set -euo pipefail

log_tag=bench/queue
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../testbed/lib.sh" # root, die, median
cd "$root"
runs=${RUNS:-5}
log=$root/.kolotoc/bench/queue.log
mkdir -p "$(dirname "$log")"
: >"$log"
eval "$(testbed/stack/stack.sh env)"

[ -e Pulumi.benchq.yaml ] && die "Pulumi.benchq.yaml exists: a run of this script was interrupted; remove it (and stack benchq: pulumi stack rm --force benchq)"
for s in dev benchq; do
  if pulumi stack ls --json 2>/dev/null | jq -e --arg s "$s" '.[] | select(.name == $s and (.resourceCount // 0) > 0)' >/dev/null; then
    die "stack $s has resources: destroy it first (the runs measure fresh ups)"
  fi
done

# The queued copy: the committed dev file plus the queue.
cp Pulumi.dev.yaml Pulumi.benchq.yaml
printf '  kolotoc:queue:\n    type: kueue\n' >>Pulumi.benchq.yaml
cleanup() {
  STACK=benchq testbed/stack/stack.sh config >/dev/null 2>&1 && \
    pulumi destroy --yes --stack benchq --config-file .kolotoc/stacks/benchq/effective.yaml >>"$log" 2>&1 || true
  pulumi stack rm --force --yes benchq >>"$log" 2>&1 || true
  rm -rf Pulumi.benchq.yaml .kolotoc/stacks/benchq
}
trap cleanup EXIT
# Both stacks created and their secrets set before any run (stack.sh's prepare, which config
# runs): the first up of a new stack also does that, and it is not what is measured.
for s in dev benchq; do STACK=$s testbed/stack/stack.sh config >>"$log" 2>&1 || die "preparing stack $s failed (log: $log)"; done
# The program built before any run: the first up after a change of the code builds it (stack.sh
# has Pulumi `go run` the program, which caches the executable), and that is not what is
# measured either. Run outside Pulumi, the program only fails at once.
go run . >/dev/null 2>&1 || true

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }'; }

declare -A t
# one STACK: a fresh up, timed to up, towers Ready and launcher complete; then destroyed.
one() {
  local stack=$1 ns=kolotoc-$1 start
  echo "\$ STACK=$stack testbed/stack/stack.sh up" >>"$log"
  start=$EPOCHREALTIME
  STACK=$stack testbed/stack/stack.sh up >>"$log" 2>&1 || die "up of $stack failed (log: $log)"
  t[$stack.up]+="$(since "$start") "
  local towers=()
  for i in $(seq 0 $(($(pulumi stack output towerCount --stack "$stack") - 1))); do towers+=("tower-$i"); done
  until kubectl -n "$ns" get pod "${towers[@]}" >/dev/null 2>&1; do sleep 0.2; done
  kubectl -n "$ns" wait --for=condition=Ready "${towers[@]/#/pod/}" --timeout=300s >>"$log" 2>&1 || die "towers of $stack not Ready (log: $log)"
  t[$stack.towers]+="$(since "$start") "
  kubectl -n "$ns" wait --for=condition=Complete job/launcher --timeout=300s >>"$log" 2>&1 || die "launcher of $stack did not complete (log: $log)"
  t[$stack.launcher]+="$(since "$start") "
  pulumi destroy --yes --stack "$stack" --config-file ".kolotoc/stacks/$stack/effective.yaml" >>"$log" 2>&1 || die "destroy of $stack failed (log: $log)"
}

for _ in $(seq "$runs"); do
  one dev
  one benchq
done

echo "| from the start of a fresh up, seconds ($runs runs) | queue off | queue on (Kueue) |"
echo "|---|---|---|"
for m in up towers launcher; do
  printf '| %s: %s / %s | **%s** | **%s** |\n' "$m" "${t[dev.$m]% }" "${t[benchq.$m]% }" \
    "$(tr ' ' '\n' <<<"${t[dev.$m]}" | grep . | median)" "$(tr ' ' '\n' <<<"${t[benchq.$m]}" | grep . | median)"
done
