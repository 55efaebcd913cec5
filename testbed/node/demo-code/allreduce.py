#!/usr/bin/python3
"""MPI check, run from the cloned repository: every rank allreduces rank+1.

Every rank prints "rank R/N on HOST code=COMMIT greeting=GREETING uid=UID": the commit of the
checkout it runs from (kolotoc:code), the value of $DEMO_GREETING (towers.env) and the user it runs
as (kolotoc:runAsUser). Rank 0 then prints "allreduce: sum=S expected=E ranks=N hosts=h1,h2,...",
and writes the sum to the shared claim as a run would its checkpoint (RESULT, replaced whole);
every rank exits 1 when S is wrong.
"""
import os
import socket
import sys

from mpi4py import MPI

# Where rank 0 leaves its result: on the shared claim (storage.mountPath, default /shared).
RESULT = "/shared/allreduce-result.txt"


def commit():
    """The checkout's commit, read from its .git directory (no git in the rank's image)."""
    git = os.path.join(os.environ.get("KOLOTOC_CODE_DIR", os.path.dirname(__file__)), ".git")
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


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
host = socket.gethostname()
greeting = os.environ.get("DEMO_GREETING", "(unset)")
print(f"rank {rank}/{size} on {host} code={commit()} greeting={greeting} uid={os.getuid()}", flush=True)

total = comm.allreduce(rank + 1, op=MPI.SUM)
hosts = comm.gather(host, root=0)
expected = size * (size + 1) // 2
if rank == 0:
    print(f"allreduce: sum={total} expected={expected} ranks={size} "
          f"hosts={','.join(sorted(set(hosts)))}", flush=True)
    # A new file renamed over the old one: a result left by another user is replaced, not edited.
    with open(RESULT + ".tmp", "w") as f:
        f.write(f"{total}\n")
    os.replace(RESULT + ".tmp", RESULT)
    print(f"allreduce: wrote {RESULT}", flush=True)
sys.exit(0 if total == expected else 1)
