#!/usr/bin/python3
"""MPI check: every rank allreduces rank+1; rank 0 prints the sum and the hosts.

Every rank prints "rank R/N on HOST"; rank 0 then prints
"allreduce: sum=S expected=E ranks=N hosts=h1,h2,..." and every rank exits 1 when S is wrong.
"""
import socket
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
host = socket.gethostname()
print(f"rank {rank}/{size} on {host}", flush=True)

total = comm.allreduce(rank + 1, op=MPI.SUM)
hosts = comm.gather(host, root=0)
expected = size * (size + 1) // 2
if rank == 0:
    print(f"allreduce: sum={total} expected={expected} ranks={size} "
          f"hosts={','.join(sorted(set(hosts)))}", flush=True)
sys.exit(0 if total == expected else 1)
