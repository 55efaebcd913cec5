#!/usr/bin/python3
"""train.py's data-parallel SGD over torchrun's ranks (gloo): checkpoints and resumes.

Run by torchrun (kolotoc:elastic.command: ["/code/train_torch.py", "--idle"]). The same model,
data and checkpoints as train.py, in PyTorch: every rank's gradient shard is all-reduced, rank 0
writes step-<n>.pt every DEMO_CHECKPOINT_EVERY steps into $KOLOTOC_CHECKPOINT_DIR (and the step
in latest-step), and every rank resumes from the newest checkpoint there when torchrun starts
the worker group again (a worker lost: torchrun's restarts, elastic.maxRestarts; the attempt is
torchrun's $TORCHELASTIC_RESTART_COUNT). A rank given SIGTERM finishes its step, writes a
checkpoint and exits 143. With --idle it sleeps once done, as a StatefulSet's worker must (it
would be started again).

It prints "train: rank R/N: resumed at step S from FILE (attempt A)" or "... starting at step 0",
"train: step S loss=L" (rank 0, every checkpoint), and "train: done steps=N ranks=R loss=L
digest=D" (rank 0).
"""
import glob
import hashlib
import os
import re
import signal
import struct
import sys
import time

import torch
import torch.distributed as dist

DIM, BATCH, SEED, LR = 16, 64, 20261128, 0.01
STEPS = int(os.environ.get("DEMO_STEPS", "300"))
STEP_SECONDS = float(os.environ.get("DEMO_STEP_SECONDS", "0.02"))
CHECKPOINT_EVERY = int(os.environ.get("DEMO_CHECKPOINT_EVERY", "50"))
CKPT = os.environ.get("KOLOTOC_CHECKPOINT_DIR", "")


def batch(step):
    gen = torch.Generator().manual_seed(SEED * 100003 + step)
    x = torch.randn(BATCH, DIM, generator=gen, dtype=torch.float64)
    truth = torch.randn(DIM, generator=torch.Generator().manual_seed(SEED), dtype=torch.float64)
    return x, x @ truth + 0.1 * torch.randn(BATCH, generator=gen, dtype=torch.float64)


def newest():
    best = (0, None)
    for path in glob.glob(os.path.join(CKPT, "step-*.pt")) if CKPT else []:
        m = re.search(r"step-(\d+)\.pt$", path)
        if m and int(m.group(1)) > best[0]:
            best = (int(m.group(1)), path)
    return best


def save(step, w, rank, reason):
    path = os.path.join(CKPT, f"step-{step:08d}.pt")
    tmp = f"{path}.{rank}.tmp"
    torch.save({"w": w, "step": step, "rank": rank, "reason": reason}, tmp)
    os.replace(tmp, path)
    if step >= newest()[0]:
        with open(os.path.join(CKPT, f"latest-step.{rank}.tmp"), "w") as f:
            f.write(f"{step}\n")
        os.replace(os.path.join(CKPT, f"latest-step.{rank}.tmp"), os.path.join(CKPT, "latest-step"))
    for old in sorted(glob.glob(os.path.join(CKPT, "step-*.pt")))[:-3]:
        try:
            os.remove(old)
        except OSError:
            pass
    return path


def main():
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", os.environ.get("KOLOTOC_ATTEMPT", "0"))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    if CKPT:
        os.makedirs(CKPT, exist_ok=True)
    start, path = newest()
    if path:
        w = torch.load(path)["w"]
        print(f"train: rank {rank}/{size}: resumed at step {start} from {path} (attempt {attempt})", flush=True)
    else:
        w = torch.zeros(DIM, dtype=torch.float64)
        print(f"train: rank {rank}/{size}: starting at step 0 (attempt {attempt})", flush=True)
    dist.barrier()

    loss = float("nan")
    for step in range(start + 1, STEPS + 1):
        x, y = batch(step)
        xs, ys = x[rank::size], y[rank::size]
        residual = xs @ w - ys
        local = torch.cat([xs.T @ residual * (2.0 / BATCH), (residual @ residual).reshape(1)])
        dist.all_reduce(local, op=dist.ReduceOp.SUM)
        w = w - LR * local[:DIM]
        loss = float(local[DIM]) / BATCH
        time.sleep(STEP_SECONDS)
        if stopping:
            if CKPT:
                print(f"train: rank {rank}: SIGTERM at step {step}: checkpoint {save(step, w, rank, 'sigterm')}", flush=True)
            os._exit(143)
        if rank == 0 and step % CHECKPOINT_EVERY == 0:
            if CKPT:
                save(step, w, rank, "periodic")
            print(f"train: step {step} loss={loss:.6f}", flush=True)

    if rank == 0:
        if CKPT:
            save(STEPS, w, rank, "final")
        digest = hashlib.sha256(struct.pack(f"<{DIM}d", *w.tolist())).hexdigest()[:16]
        print(f"train: done steps={STEPS} ranks={size} loss={loss:.6f} digest={digest}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    while "--idle" in sys.argv[1:]:
        time.sleep(3600)


if __name__ == "__main__":
    main()
