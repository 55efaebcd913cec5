#!/usr/bin/env bash
# Runs the Pulumi program against the local test bed, with no account and no network:
#
# testbed/stack/stack.sh COMMAND:
#   up        create/select the stack, set its dev secrets once, pulumi up, outputs
#   preview   pulumi preview --diff
#   outputs   pulumi stack output
#   down      pulumi destroy, then testbed/cluster/cluster.sh down
#   config    the stack's effective config (committed file + secrets), secrets hidden
#   secret K  set secret K (kolotoc:<key>, or a path in it) of the stack from stdin
#   env       print the environment these use, as shell exports:
#             eval "$(testbed/stack/stack.sh env)" && pulumi stack ls
#
# STACK selects the stack (default dev). State is a local file backend under .kolotoc/state; its
# secrets are encrypted with a passphrase generated once into .kolotoc/passphrase. The cluster
# itself is testbed/cluster/cluster.sh's; `up` and `preview` do not start it (make up and make
# preview do).
#
# Committed stack files stay untouched. With the passphrase provider, Pulumi writes a per-machine
# `encryptionsalt` and the `secure:` ciphertexts into the stack's config file, and v3.250.0 has no
# way to create a stack without doing so (stack init/select take no --config-file). So:
#   - the stack is created from a shadow project directory, .kolotoc/stacks/<stack>/, holding a
#     copy of Pulumi.yaml: the salt lands in .kolotoc/stacks/<stack>/Pulumi.<stack>.yaml (the
#     "secrets file"), which then also receives the generated secrets. If it is lost, the salt
#     is recovered from the stack's state (PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER) and new
#     secrets are generated.
#   - before a command the effective config .kolotoc/stacks/<stack>/effective.yaml is rebuilt
#     from the secrets file plus every value of the committed Pulumi.<stack>.yaml (read with
#     `pulumi config --json` and applied with `pulumi config set-all --json`, so Pulumi does the
#     YAML), and every command gets --config-file pointing to it. The committed file stays the one
#     place where settings are edited; it must not hold secure values itself. It is rebuilt only
#     when the committed file or the secrets file changed since it was last built, or the stack
#     is missing from the state (prepared): otherwise a preview is one CLI call.
set -euo pipefail
umask 077  # the passphrase, state and secrets files are for this user only

log_tag=stack
# shellcheck source=testbed/lib.sh
. "$(dirname "$0")/../lib.sh"
# pulumi finds the project (Pulumi.yaml) from its working directory: run from the checkout,
# wherever the script is called from.
cd "$root"
state_dir=$root/.kolotoc
stack=${STACK:-dev}
shadow=$state_dir/stacks/$stack
secrets_file=$shadow/Pulumi.$stack.yaml
effective=$shadow/effective.yaml
committed=$root/Pulumi.$stack.yaml
prepared_stamp=$shadow/prepared  # what the last completed prepare was built from (prepared)

# Secret config values a stack may need, generated here when missing (never overwritten, never
# printed): the entrypoint's Jupyter password, the seed the ring's ssh keys are derived from and
# Grafana's admin password (kolotoc:monitoring). A stack that does not use one ignores it. The
# secrets only the user has (registry passwords, a storage account key, a TLS key) are set with
# `testbed/stack/stack.sh secret <key>` (cmd_secret), into the same secrets file.
SECRET_KEYS=(kolotoc:jupyterPassword kolotoc:sshKeySeed kolotoc:grafanaPassword)

# random_hex BYTES: BYTES random bytes from the kernel, hex-encoded.
random_hex() { head -c "$1" /dev/urandom | od -An -v -tx1 | tr -d ' \n'; }

setup_env() {
  mkdir -p "$state_dir/state" "$state_dir/pulumi-home"
  if [ ! -s "$state_dir/passphrase" ]; then
    if [ -n "$(ls -A "$state_dir/state" 2>/dev/null)" ]; then
      die "$state_dir/passphrase is missing but $state_dir/state holds stacks encrypted with it; restore it (or remove $state_dir/state and $state_dir/stacks to start over)"
    fi
    (umask 077 && random_hex 32 >"$state_dir/passphrase.tmp")
    mv "$state_dir/passphrase.tmp" "$state_dir/passphrase"
    log "generated the state passphrase in $state_dir/passphrase"
  fi
  # .kolotoc/bin first, once, however often this environment is re-entered.
  PATH=$bin_dir:$(path_without "$bin_dir")
  export PATH
  export PULUMI_BACKEND_URL=file://$state_dir/state
  export PULUMI_CONFIG_PASSPHRASE_FILE=$state_dir/passphrase
  unset PULUMI_CONFIG_PASSPHRASE  # it would take precedence over the file
  export PULUMI_HOME=$state_dir/pulumi-home
  export PULUMI_SKIP_UPDATE_CHECK=true
  export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
  export PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK=true
  # The Go language host the test bed builds (v3.66) links the program anew at every command
  # (`go build`, 25-40 s on 2 cores); `go run` caches the executable between commands.
  export PULUMI_GO_USE_RUN=true
  export KOLOTOC_KUBECONFIG=$kubeconfig
  export KUBECONFIG=$KOLOTOC_KUBECONFIG
  # The Kubernetes provider copies the kubeconfig it is given into a new file of $TMPDIR at each
  # start and never removes it (pulumi-kubernetes' provider.go, writeKubeconfigToFile: for Helm):
  # a copy of the cluster's admin credentials in /tmp per command. The commands run here get a
  # private directory of this run's own (another run's provider may still read its copy), removed
  # when this script ends.
  mkdir -p "$state_dir/tmp"
  TMPDIR=$(mktemp -d "$state_dir/tmp/run.XXXXXX")
  export TMPDIR
  trap 'rm -rf "$TMPDIR"' EXIT
  export KUBECACHEDIR=${KUBECACHEDIR:-$state_dir/kube-cache}
  # The Kubernetes provider into this PULUMI_HOME's plugin cache (testbed/tools/tools.sh: not on
  # PATH, where the CLI would warn about it on every command); need_pulumi says so when it is not
  # built yet.
  "$testbed/tools/tools.sh" --install-plugins "$PULUMI_HOME" 2>/dev/null || true
}

need_pulumi() {
  command -v pulumi >/dev/null || die "pulumi is missing from $state_dir/bin: run 'make tools' first"
  "$testbed/tools/tools.sh" --install-plugins "$PULUMI_HOME" || die "the Kubernetes provider plugin is not built: run 'make tools' first"
}

stack_exists() { pulumi stack select "$stack" >/dev/null 2>&1; }

ensure_stack() {
  if stack_exists; then
    return
  fi
  log "creating stack $stack (backend $PULUMI_BACKEND_URL)"
  mkdir -p "$shadow"
  cp "$root/Pulumi.yaml" "$shadow/Pulumi.yaml"
  pulumi --cwd "$shadow" stack init "$stack" >/dev/null
  pulumi stack select "$stack"
}

# ensure_secrets: sets each of SECRET_KEYS in the secrets file when `pulumi config get` reports it
# missing. The value goes through a pipe, never argv or the terminal. A stack created elsewhere
# (no secrets file yet) gets one, with the salt taken from the stack's state (fallback below).
ensure_secrets() {
  local key err value
  if [ ! -f "$secrets_file" ]; then
    mkdir -p "$shadow"
    : >"$secrets_file"
  fi
  for key in "${SECRET_KEYS[@]}"; do
    if value=$(PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true \
      pulumi config get "$key" --stack "$stack" --config-file "$secrets_file" 2>/dev/null) && [ -n "$value" ]; then
      # (an empty value is Pulumi.yaml's default for a key the file does not set: missing)
      # Seeds generated before the program asked for 256 bits were 192: replace them (the
      # towers' ssh key changes with it, nothing else does).
      if [ "$key" != kolotoc:sshKeySeed ] || [ "${#value}" -ge 64 ]; then
        continue
      fi
      log "replacing the generated $key of stack $stack: under 256 bits"
    else
      err=$(PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true \
        pulumi config get "$key" --stack "$stack" --config-file "$secrets_file" 2>&1 >/dev/null) || true
      case $err in
        "" | *"not found"*) ;;
        *) die "pulumi config get $key failed: $err" ;;
      esac
      log "setting a generated secret $key for stack $stack"
    fi
    random_hex 32 | PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true \
      pulumi config set --secret "$key" --stack "$stack" --config-file "$secrets_file"
  done
}

build_effective_config() {
  local tmp=$shadow/effective.tmp.yaml  # pulumi picks the format by extension
  cp "$secrets_file" "$tmp"
  if [ -f "$committed" ]; then
    if grep -Eq '^encryptionsalt:|(^|[{ ])secure:' "$committed"; then
      die "$committed holds an encryptionsalt or secure values: secrets belong in $secrets_file (see $0)"
    fi
    # `pulumi config --json` includes Pulumi.yaml's defaults (plain empty values) for the keys
    # the file leaves out: those the secrets file sets are dropped, or they would replace its
    # secrets with the empty default.
    local own
    own=$(pulumi config --stack "$stack" --config-file "$secrets_file" --json | jq -c '[to_entries[] | select(.value.secret) | .key]')
    own=${own:-[]}
    pulumi config set-all --stack "$stack" --config-file "$tmp" \
      --json "$(pulumi config --stack "$stack" --config-file "$committed" --json \
        | jq --argjson own "$own" 'with_entries(select(.key as $k | $own | index($k) | not))')"
  else
    log "no $committed: stack $stack runs with the program's defaults"
  fi
  mv "$tmp" "$effective"
}

# prepared: the stack exists in the state, its effective config is there, and nothing it is built
# from (the committed stack file, the secrets file) changed since the last prepare that completed:
# the five Pulumi CLI calls of a full prepare (about 3 s) would change nothing. The state file is
# looked for where the file backend keeps it; any doubt means a full prepare.
prepared() {
  local project
  project=$(sed -n 's/^name:[[:space:]]*//p' "$root/Pulumi.yaml")
  [ -f "$effective" ] && [ -f "$prepared_stamp" ] && [ -n "$project" ] \
    && [ -f "$state_dir/state/.pulumi/stacks/$project/$stack.json" ] \
    && [ "$(cat "$prepared_stamp")" = "$(prepare_inputs)" ]
}

prepare_inputs() {
  local f
  for f in "$committed" "$secrets_file"; do
    if [ -f "$f" ]; then sha256sum <"$f"; else echo absent; fi
  done | sha256sum | cut -d' ' -f1
}

prepare() {
  need_pulumi
  if prepared; then
    return
  fi
  rm -f "$prepared_stamp"
  ensure_stack
  ensure_secrets
  build_effective_config
  prepare_inputs >"$prepared_stamp"
}

# cluster_uid: the identity of the local cluster now running (its kube-system namespace's UID):
# a cluster created anew has another, even under the same name and port.
cluster_uid() {
  kubectl get namespace kube-system -o jsonpath='{.metadata.uid}' --request-timeout=5s 2>/dev/null || true
}

# forget_old_cluster: the stack's objects live in one cluster. When the local cluster was deleted
# and created again since the last up, they went with it, but the state still lists them and
# `pulumi up` would report them unchanged while the new cluster holds none. `pulumi refresh`
# cannot tell: it reaches the cluster through the kubeconfig kept in the state, the old cluster's,
# whose CA signs nothing any more (and with --run-program, v3.250's engine fails on component
# outputs). The old cluster is gone for certain (there is one local cluster, and its identity
# changed), so its objects are dropped from the state and the up creates them in the new one.
forget_old_cluster() {
  local now known
  now=$(cluster_uid)
  known=$(cat "$shadow/cluster-uid" 2>/dev/null || true)
  if [ -n "$known" ] && [ -n "$now" ] && [ "$known" != "$now" ]; then
    log "the local cluster was created anew since stack $stack was last deployed: its objects went with the old one; forgetting them"
    pulumi state delete --all --yes --force --stack "$stack" >"$shadow/forget.log" 2>&1 \
      || { tail -n 20 "$shadow/forget.log" >&2; die "pulumi state delete failed (log: $shadow/forget.log)"; }
  fi
}

# local_images: the local images the stack file names (kolotoc.local/NAME:TAG), built if missing
# and imported into the real node when it runs: make up's cluster built only those of the stack
# it was started for (KOLOTOC_NODE_IMAGES, the Makefile), and a stack deployed later may run others.
local_images() {
  [ -f "$committed" ] || return 0
  local names=()
  mapfile -t names < <("$testbed/images/images.sh" needs "$committed")
  "$testbed/node/node.sh" images "${names[@]}"
}

cmd_up() {
  prepare
  local_images
  forget_old_cluster
  log "pulumi up (stack $stack)"
  pulumi up --yes --skip-preview=false --stack "$stack" --config-file "$effective"
  cluster_uid >"$shadow/cluster-uid"
  cmd_outputs
}

# cmd_config: the stack's effective config as its commands get it (secrets hidden).
cmd_config() {
  prepare
  pulumi config --stack "$stack" --config-file "$effective"
}

cmd_preview() {
  prepare
  pulumi preview --diff --stack "$stack" --config-file "$effective"
}

cmd_outputs() {
  need_pulumi
  log "outputs of stack $stack"
  pulumi stack output --stack "$stack"
}

cmd_down() {
  need_pulumi
  local cluster_state=0
  "$testbed/cluster/cluster.sh" status 2>/dev/null || cluster_state=$?
  if stack_exists; then
    if [ "$cluster_state" != 3 ]; then  # 3: no cluster at all
      # The cluster holds the resources: start it again if it was stopped, so destroy can reach it.
      "$testbed/cluster/cluster.sh" up
      prepare
      log "pulumi destroy (stack $stack)"
      pulumi destroy --yes --stack "$stack" --config-file "$effective"
    else
      log "no local cluster: nothing to destroy. Stack $stack's state may still list resources of a deleted cluster;"
      log "forget them with: eval \"\$(testbed/stack/stack.sh env)\" && pulumi stack rm --force --preserve-config $stack"
    fi
  else
    log "stack $stack does not exist"
  fi
  rm -f "$shadow/cluster-uid"
  # The local cluster is shared by every local stack: it goes only when no other stack still has
  # resources in it. When that cannot be told, it stays.
  local listing others
  if ! listing=$(pulumi stack ls --json 2>/dev/null) \
    || ! others=$(printf '%s\n' "$listing" | jq -r --arg s "$stack" '.[] | select(.name != $s and (.resourceCount // 0) > 0) | .name' | paste -sd' ' -); then
    log "keeping the local cluster: could not list the other stacks of $PULUMI_BACKEND_URL ('pulumi stack ls --json' and jq); 'make cluster-down' deletes it with whatever runs there"
    return
  fi
  if [ -n "$others" ]; then
    log "keeping the local cluster: stack(s) $others still deployed in it ('make down STACK=<name>' for each, or 'make cluster-down' to delete it with them)"
    return
  fi
  "$testbed/cluster/cluster.sh" down
}

# cmd_secret KEY: sets a secret of the stack from stdin (never argv, never the terminal's echo)
# into its secrets file, beside the generated ones, so the committed stack file keeps no secure
# values; KEY may be a path (kolotoc:registryPasswords.ghcr.io, the server taken whole, or
# Pulumi's own kolotoc:registryPasswords["ghcr.io"]). The next up or preview uses it.
cmd_secret() {
  local key=${1:-}
  [ -n "$key" ] || die "usage: printf %s VALUE | [STACK=name] $0 secret kolotoc:<key>"
  case $key in kolotoc:*) ;; *) die "$key: secrets of this program are kolotoc:<key>" ;; esac
  # Pulumi splits a --path at every dot, and a registry server has dots: everything after
  # registryPasswords. is one key of that map (kolotoc:registryPasswords["ghcr.io"]).
  case $key in
    kolotoc:registryPasswords.*) key="kolotoc:registryPasswords[\"${key#kolotoc:registryPasswords.}\"]" ;;
  esac
  need_pulumi
  ensure_stack
  [ -f "$secrets_file" ] || { mkdir -p "$shadow"; : >"$secrets_file"; }
  if [ -t 0 ]; then log "value of $key (not echoed), then Enter:"; fi
  local value
  IFS= read -rs value || [ -n "$value" ] || die "no value on stdin for $key"
  # Fed by process substitution, not a pipe: under pipefail a pulumi that exits before reading
  # (an error, or a test's fake) made printf die of SIGPIPE and the command fail with 141.
  PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true \
    pulumi config set --secret --path "$key" --stack "$stack" --config-file "$secrets_file" \
    < <(printf '%s' "$value")
  log "set secret $key of stack $stack in $secrets_file"
}

cmd_env() {
  local v
  for v in PATH PULUMI_BACKEND_URL PULUMI_CONFIG_PASSPHRASE_FILE PULUMI_HOME PULUMI_SKIP_UPDATE_CHECK \
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK PULUMI_GO_USE_RUN \
    KOLOTOC_KUBECONFIG KUBECONFIG KUBECACHEDIR; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
  echo 'unset PULUMI_CONFIG_PASSPHRASE'
}

setup_env
case ${1:-} in
  up) cmd_up ;;
  preview) cmd_preview ;;
  outputs) cmd_outputs ;;
  down) cmd_down ;;
  env) cmd_env ;;
  secret) shift; cmd_secret "$@" ;;
  config) cmd_config ;;
  *) echo "usage: [STACK=name] $0 up|preview|outputs|down|env|config|secret <key>" >&2; exit 2 ;;
esac
