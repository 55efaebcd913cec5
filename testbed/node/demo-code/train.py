#!/usr/bin/python3
"""Data-parallel SGD over MPI ranks that checkpoints and resumes: Kolotoc's training contract.

The model is a linear regression's weights (float64, DIM of them). Each step draws a batch of
synthetic data from a fixed seed and the step number, each rank takes its shard of the batch's
rows, and the gradients are summed over the ranks with one allreduce: every rank holds the same
weights after every step, and a run's result depends only on its steps and its number of ranks,
not on where it was interrupted.

The contract (docs/using/checkpoints.md): $KOLOTOC_CHECKPOINT_DIR is the run's directory on the
shared store, $KOLOTOC_ATTEMPT the attempt (0 first), $KOLOTOC_RUN_ID the run. Rank 0 writes a
checkpoint every DEMO_CHECKPOINT_EVERY steps (step-<n>.npz, written whole then renamed, and the
step in latest-step); every rank resumes from the newest checkpoint there. A rank given SIGTERM
(its tower drained, reclaimed or deleted) finishes the step it is in, writes a checkpoint of it
and exits 143. Without $KOLOTOC_CHECKPOINT_DIR nothing is written or read.

Settings (environment): DEMO_STEPS (default 300), DEMO_STEP_SECONDS (a pause per step standing
for real compute, default 0.02), DEMO_CHECKPOINT_EVERY (default 50), DEMO_GREETING (printed).

It prints, per rank: "rank R/N on HOST code=COMMIT greeting=G uid=U attempt=A run=ID"; then
"train: resumed at step S from FILE" or "train: starting at step 0"; rank 0 "train: step S
loss=L" every checkpoint; a rank stopped: "train: rank R: SIGTERM at step S: checkpoint FILE";
at the end rank 0 "train: done steps=N ranks=R hosts=h1,h2 loss=L digest=D", D the SHA-256 of
the final weights' bytes, and writes it to result.txt in the checkpoint directory.
"""
import glob
import hashlib
import os
import re
import signal
import socket
import sys
import time

import numpy as np
from mpi4py import MPI

DIM, BATCH, SEED, LR = 16, 64, 20261128, 0.01
STEPS = int(os.environ.get("DEMO_STEPS", "300"))
STEP_SECONDS = float(os.environ.get("DEMO_STEP_SECONDS", "0.02"))
CHECKPOINT_EVERY = int(os.environ.get("DEMO_CHECKPOINT_EVERY", "50"))
CKPT = os.environ.get("KOLOTOC_CHECKPOINT_DIR", "")


def commit():
    """The checkout's commit, read from its .git directory (no git in the rank's image)."""
    git = os.path.join(os.environ.get("KOLOTOC_CODE_DIR", os.path.dirname(os.path.abspath(__file__))), ".git")
    try:
        head = open(os.path.join(git, "HEAD")).read().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            path = os.path.join(git, ref)
            if os.path.exists(path):
                return open(path).read().strip()
            for line in open(os.path.join(git, "packed-refs")):
                if line.rstrip().endswith(" " + ref):
                    return line.split()[0]
        return head
    except OSError as e:
        return f"unknown({e.__class__.__name__})"


def batch(step):
    """The step's batch, the same on every rank and in every attempt."""
    rng = np.random.default_rng([SEED, step])
    x = rng.standard_normal((BATCH, DIM))
    truth = np.random.default_rng(SEED).standard_normal(DIM)
    return x, x @ truth + 0.1 * rng.standard_normal(BATCH)


def newest():
    """The newest checkpoint in the run's directory: (step, path), or (0, None)."""
    best = (0, None)
    for path in glob.glob(os.path.join(CKPT, "step-*.npz")) if CKPT else []:
        m = re.search(r"step-(\d+)\.npz$", path)
        if m and int(m.group(1)) > best[0]:
            best = (int(m.group(1)), path)
    return best


def save(step, w, rank, reason):
    """Writes step-<step>.npz whole, then renames it in place, then latest-step."""
    path = os.path.join(CKPT, f"step-{step:08d}.npz")
    tmp = f"{path}.{rank}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, w=w, step=step, rank=rank, reason=reason)
    os.replace(tmp, path)
    if step >= newest()[0]:
        with open(os.path.join(CKPT, f"latest-step.{rank}.tmp"), "w") as f:
            f.write(f"{step}\n")
        os.replace(os.path.join(CKPT, f"latest-step.{rank}.tmp"), os.path.join(CKPT, "latest-step"))
    return path


def prune(keep=3):
    """Rank 0 keeps the newest checkpoints only."""
    paths = sorted(glob.glob(os.path.join(CKPT, "step-*.npz")))
    for path in paths[:-keep]:
        try:
            os.remove(path)
        except OSError:
            pass


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    host = socket.gethostname()
    attempt, run = os.environ.get("KOLOTOC_ATTEMPT", "0"), os.environ.get("KOLOTOC_RUN_ID", "(none)")
    print(f"rank {rank}/{size} on {host} code={commit()} greeting={os.environ.get('DEMO_GREETING', '(unset)')} "
          f"uid={os.getuid()} attempt={attempt} run={run}", flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    if CKPT:
        os.makedirs(CKPT, exist_ok=True)
    start, path = newest()
    if path:
        w = np.load(path)["w"]
        print(f"train: rank {rank}: resumed at step {start} from {path} (attempt {attempt})", flush=True)
    else:
        w = np.zeros(DIM)
        print(f"train: rank {rank}: starting at step 0 (attempt {attempt})", flush=True)
    comm.Barrier()  # every rank has read the checkpoint before rank 0 writes the next

    loss = float("nan")
    for step in range(start + 1, STEPS + 1):
        x, y = batch(step)
        xs, ys = x[rank::size], y[rank::size]
        residual = xs @ w - ys
        local = np.append(xs.T @ residual * (2.0 / BATCH), residual @ residual)
        total = np.empty_like(local)
        comm.Allreduce(local, total, op=MPI.SUM)
        w = w - LR * total[:DIM]
        loss = total[DIM] / BATCH
        time.sleep(STEP_SECONDS)
        if stopping:
            if CKPT:
                path = save(step, w, rank, "sigterm")
                print(f"train: rank {rank}: SIGTERM at step {step}: checkpoint {path}", flush=True)
            else:
                print(f"train: rank {rank}: SIGTERM at step {step}: no checkpoint directory", flush=True)
            sys.stdout.flush()
            os._exit(143)  # not MPI_Finalize: the other ranks are not there to finish with
        if rank == 0 and step % CHECKPOINT_EVERY == 0:
            if CKPT:
                save(step, w, rank, "periodic")
                prune()
            print(f"train: step {step} loss={loss:.6f}", flush=True)

    hosts = comm.gather(host, root=0)
    if rank == 0:
        digest = hashlib.sha256(w.tobytes()).hexdigest()[:16]
        if CKPT:
            save(STEPS, w, rank, "final")
            with open(os.path.join(CKPT, "result.txt.tmp"), "w") as f:
                f.write(f"steps={STEPS} ranks={size} loss={loss:.6f} digest={digest}\n")
            os.replace(os.path.join(CKPT, "result.txt.tmp"), os.path.join(CKPT, "result.txt"))
        print(f"train: done steps={STEPS} ranks={size} hosts={','.join(sorted(set(hosts)))} "
              f"loss={loss:.6f} digest={digest}", flush=True)


if __name__ == "__main__":
    main()
