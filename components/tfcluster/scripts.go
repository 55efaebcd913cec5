package tfcluster

// entryScript builds TF_CONFIG from the template's cluster spec and task type and the index in
// the pod's hostname (<name>-<ordinal>, as a StatefulSet names its pods), then runs the program.
// POSIX sh: the TensorFlow images have no bash guarantee in their slimmer variants.
const entryScript = `#!/bin/sh
set -eu
host=${HOSTNAME:-$(hostname)}
index=${host##*-}
case "$index" in
  ''|*[!0-9]*)
    echo "tfcluster: cannot read a task index from hostname $host (want <name>-<ordinal>)" >&2
    exit 1 ;;
esac
TF_CONFIG=$(printf '{"cluster":%s,"task":{"type":"%s","index":%d}}' "$KOLOTOC_TF_CLUSTER" "$KOLOTOC_TF_TASK_TYPE" "$index")
export TF_CONFIG
echo "tfcluster: $host is $KOLOTOC_TF_TASK_TYPE $index; TF_CONFIG=$TF_CONFIG" >&2
if [ "${KOLOTOC_ON_SUCCESS:-keep}" != release ]; then
  exec "$@"
fi
status=0
"$@" || status=$?
if [ "$status" = 0 ]; then
  # onSuccess release (the chief only): the run is done; every task goes, and its GPUs with it.
  echo "tfcluster: the chief succeeded; releasing the cluster (onSuccess: release)" >&2
  # shellcheck disable=SC2086 # one name per task type
  python3 "$(dirname "$0")/release.py" $KOLOTOC_RELEASE || echo "tfcluster: could not release the cluster" >&2
fi
exit "$status"
`

// program is the built-in check, TensorFlow 2's parameter-server architecture at its smallest:
// workers and parameter servers run a tf.distribute.Server; the chief coordinates a few hundred
// steps that update a variable living on the parameter servers, checkpointing every
// checkpointEvery steps in the chief's checkpoint directory and resuming from the newest
// checkpoint there when it starts again (a lost chief or task), then logs it for TensorBoard;
// the evaluator follows the checkpoints. It needs a chief and at least one
// parameter server; a program of your own (tfcluster.command) needs neither.
const program = `"""Kolotoc's TensorFlow check: parameter-server training at its smallest."""
import json
import os
import time

os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
import tensorflow as tf  # noqa: E402

STEPS = 200
CHECKPOINT_EVERY = 50


def serve(resolver, task):
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=task["type"], task_index=task["index"],
        protocol=resolver.rpc_layer or "grpc", start=True)
    server.join()


def coordinate(resolver, logdir, ckptdir):
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        total = tf.Variable(0.0)
        step = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def train_step():
        def replica_fn():
            total.assign_add(1.0)
            step.assign_add(1)
        strategy.run(replica_fn)

    checkpoint = tf.train.Checkpoint(total=total, step=step)
    manager = tf.train.CheckpointManager(checkpoint, ckptdir, max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
        print(f"chief: resumed from {manager.latest_checkpoint} at step {int(step.numpy())}", flush=True)
    path = manager.latest_checkpoint
    while int(step.numpy()) < STEPS:
        for _ in range(min(CHECKPOINT_EVERY, STEPS - int(step.numpy()))):
            coordinator.schedule(train_step)
        coordinator.join()
        path = manager.save()
        with open(os.path.join(ckptdir, "latest-step"), "w") as f:
            f.write(f"{int(step.numpy())}\n")
    with tf.summary.create_file_writer(os.path.join(logdir, "train")).as_default():
        tf.summary.scalar("total", total.read_value(), step=step.read_value())
    print(f"chief: {STEPS} steps on {len(resolver.cluster_spec().job_tasks('worker'))} workers, "
          f"total={float(total.numpy())}, checkpoint {path}", flush=True)


def evaluate(logdir, ckptdir):
    total = tf.Variable(0.0)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(total=total, step=step)
    writer = tf.summary.create_file_writer(os.path.join(logdir, "eval"))
    for path in tf.train.checkpoints_iterator(ckptdir, timeout=None):
        checkpoint.restore(path).expect_partial()
        with writer.as_default():
            tf.summary.scalar("total", total.read_value(), step=step.read_value())
        print(f"evaluator: {path}: total={float(total.numpy())}", flush=True)


def main():
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    logdir = os.environ["KOLOTOC_LOG_DIR"]
    ckptdir = os.environ["KOLOTOC_CHECKPOINT_DIR"]
    os.makedirs(logdir, exist_ok=True)
    os.makedirs(ckptdir, exist_ok=True)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if task["type"] in ("worker", "ps"):
        serve(resolver, task)
    elif task["type"] == "chief":
        coordinate(resolver, logdir, ckptdir)
    elif task["type"] == "evaluator":
        evaluate(logdir, ckptdir)
    # Stay up: a StatefulSet restarts a pod that exits, and the result is in the logs.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
`
