#!/usr/bin/env bash
# What a GPU pool at zero costs a run, side by side with a pool whose nodes are there already: for
# each size N in SIZES (simulated a2-highgpu-8g nodes, 8 GPUs each), a fresh `pulumi up` of a
# queued ring of N towers × 8 GPUs
#   fixed   on a pool of N nodes that exist before the run (nodes: N, a SimulatedNodePool)
#   zero    on a pool at zero (minNodes: 0, maxNodes: N) that the local cluster's Karpenter grows
# timed from the start of the up to every tower Ready; then, for the pool at zero, the release
# (the towers scaled to zero, as the launcher's release does with onSuccess: release) and the
# GPU node-minutes the pool still bills until its last node is gone (nodes sampled every 0.5 s,
# scaleDownAfter 30s). Prints a Markdown table. The stacks are temporary (Pulumi.benchz*.yaml),
# destroyed and removed at the end.
#
#   make bench-autoscale [SIZES_AUTOSCALE=2,16,128]   (the local cluster up: make cluster)
set -euo pipefail

log_tag=bench/autoscale
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../testbed/lib.sh" # root, die, kubectl
cd "$root"
sizes=${SIZES:-2,16,128}
log=$root/.kolotoc/bench/autoscale.log
mkdir -p "$(dirname "$log")"
: >"$log"
eval "$(testbed/stack/stack.sh env)"

# stackfile NAME N MODE: a stack of N towers × 8 GPUs, queued, on a GPU pool fixed at N nodes
# (MODE fixed) or at zero (MODE zero); nothing else runs.
stackfile() {
  local pool
  if [ "$3" = zero ]; then
    pool="{name: gpu, machineType: a2-highgpu-8g, minNodes: 0, maxNodes: $2, scaleDownAfter: 30s}"
  else
    pool="{name: gpu, machineType: a2-highgpu-8g, nodes: $2}"
  fi
  cat >"Pulumi.$1.yaml" <<YAML
config:
  kolotoc:cloud: simulated
  kolotoc:cluster: {kubeconfig: $KOLOTOC_KUBECONFIG}
  kolotoc:nodePools:
    - $pool
    - {name: cpu, machineType: n2-standard-16}
  kolotoc:queue: {type: kueue}
  kolotoc:towers: {count: $2, gpusPerTower: 8, pool: gpu, onSuccess: release}
  kolotoc:carriers: {enabled: false}
  kolotoc:sentinels: {enabled: false}
  kolotoc:entrypoint: {jupyter: false, tensorboard: false, daskDashboard: false}
YAML
}

stacks=()
cleanup() {
  local s
  for s in "${stacks[@]}"; do
    pulumi destroy --yes --stack "$s" --config-file ".kolotoc/stacks/$s/effective.yaml" >>"$log" 2>&1 || true
    pulumi stack rm --force --yes "$s" >>"$log" 2>&1 || true
    rm -rf "Pulumi.$s.yaml" ".kolotoc/stacks/$s"
  done
}
trap cleanup EXIT

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# towers_ready NS N: all N tower pods exist and are Ready.
towers_ready() {
  [ "$(kubectl -n "$1" get pods -l app.kubernetes.io/component=tower \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True)" = "$2" ]
}

pool_nodes() { kubectl get nodes -l "karpenter.sh/nodepool=$1" --no-headers 2>/dev/null | wc -l; }

declare -A t
# one NAME N MODE: a fresh up, timed to every tower Ready; for MODE zero also the release.
one() {
  local name=$1 n=$2 mode=$3 ns=kolotoc-$1 start
  stackfile "$name" "$n" "$mode"
  stacks+=("$name")
  STACK=$name testbed/stack/stack.sh config >>"$log" 2>&1 || die "preparing stack $name failed (log: $log)"
  echo "\$ STACK=$name testbed/stack/stack.sh up" >>"$log"
  start=$EPOCHREALTIME
  STACK=$name testbed/stack/stack.sh up >>"$log" 2>&1 || die "up of $name failed (log: $log)"
  until towers_ready "$ns" "$n"; do
    [ "$(since "$start" | cut -d. -f1)" -lt 600 ] || die "towers of $name not Ready after 600 s (log: $log)"
    sleep 0.2
  done
  t[$mode.$n]=$(since "$start")
  if [ "$mode" = zero ]; then
    local pool=kolotoc-$name-gpu released nodes minutes=0 last
    released=$EPOCHREALTIME
    last=$released
    kubectl -n "$ns" scale statefulset tower --replicas=0 >>"$log" 2>&1
    while nodes=$(pool_nodes "$pool"); [ "$nodes" -gt 0 ]; do
      [ "$(since "$released" | cut -d. -f1)" -lt 600 ] || die "the nodes of $pool outlived 600 s after the release (log: $log)"
      sleep 0.5
      minutes=$(awk -v m="$minutes" -v n="$nodes" -v a="$last" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", m + n * (b - a) / 60 }')
      last=$EPOCHREALTIME
    done
    t[gone.$n]=$(since "$released")
    t[minutes.$n]=$minutes
  fi
  pulumi destroy --yes --stack "$name" --config-file ".kolotoc/stacks/$name/effective.yaml" >>"$log" 2>&1 || die "destroy of $name failed (log: $log)"
}

# The program built before any run (as bench/queue.sh): the first up after a change builds it.
go run . >/dev/null 2>&1 || true
IFS=, read -r -a ns <<<"$sizes"
for n in "${ns[@]}"; do
  one "benchzf$n" "$n" fixed
  one "benchzz$n" "$n" zero
done

echo "| GPU nodes (8 GPUs each) | towers Ready, nodes there (s) | towers Ready, pool at zero (s) | nodes gone after release (s) | GPU node-minutes after release |"
echo "|---|---|---|---|---|"
for n in "${ns[@]}"; do
  printf '| %s | %s | %s | %s | %s |\n' "$n" "${t[fixed.$n]}" "${t[zero.$n]}" "${t[gone.$n]}" "${t[minutes.$n]}"
done
