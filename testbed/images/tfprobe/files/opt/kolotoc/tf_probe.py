"""Kolotoc's TensorFlow probe: NOT TensorFlow.

Debian has no TensorFlow, so on the local test bed every task of the TensorFlow cluster
(kolotoc:tfcluster) runs this probe instead of a training program. It checks what a real
tf.distribute cluster relies on and nothing more:

- it reads TF_CONFIG as tf.distribute's TFConfigClusterResolver does: "cluster" maps each job
  (chief, worker, ps) to its tasks' "host:port" addresses, as a list or as a {index: address}
  dict; "task" gives this task's "type" and "index"; "rpc_layer" defaults to grpc. A task whose
  type is not in the cluster (the evaluator) serves nothing and dials no one, as in TensorFlow;
- a task in the cluster listens on its own address's port on every interface, as a TensorFlow
  server does, and answers each connection with its identity, "<job>:<index>";
- it dials every other task of the cluster at its address and checks that the task that answers
  is the one the cluster spec names there (so the names, the ports and the NetworkPolicies are
  what the real cluster needs), retrying until every peer has answered;
- it prints one line per peer and a summary, then keeps serving (a StatefulSet restarts a task
  that exits).

It speaks plain TCP, not gRPC: it proves reachability and identity, not TensorFlow's protocol.
"""
import json
import os
import socket
import sys
import threading
import time

DEADLINE = float(os.environ.get("KOLOTOC_PROBE_TIMEOUT", "600"))


def log(msg):
    print("tf-probe: " + msg, flush=True)


def read_tf_config():
    """The cluster spec as {job: {index: address}}, and this task's type, index and RPC layer."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        sys.exit("tf-probe: TF_CONFIG is not set")
    cfg = json.loads(raw)
    cluster = {}
    for job, tasks in cfg.get("cluster", {}).items():
        if isinstance(tasks, dict):
            cluster[job] = {int(i): a for i, a in tasks.items()}
        elif isinstance(tasks, list):
            cluster[job] = dict(enumerate(tasks))
        else:
            sys.exit("tf-probe: TF_CONFIG cluster job %r is neither a list nor a dict" % job)
    task = cfg.get("task", {})
    if "type" not in task:
        sys.exit("tf-probe: TF_CONFIG has no task type")
    return cluster, task["type"], int(task.get("index", 0)), cfg.get("rpc_layer") or "grpc"


def split(address):
    host, _, port = address.rpartition(":")
    return host, int(port)


def serve(identity, port):
    srv = socket.create_server(("0.0.0.0", port))
    log("%s serving on port %d" % (identity, port))
    while True:
        conn, _ = srv.accept()
        with conn:
            try:
                conn.sendall((identity + "\n").encode())
            except OSError:
                pass


def dial(address):
    host, port = split(address)
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.settimeout(5)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(64)
            if not chunk:
                break
            data += chunk
        return data.decode().strip()


def main():
    cluster, job, index, rpc = read_tf_config()
    me = "%s:%d" % (job, index)
    log("TF_CONFIG: task %s, rpc_layer %s, cluster %s" % (
        me, rpc, json.dumps({j: [t[i] for i in sorted(t)] for j, t in cluster.items()}, sort_keys=True)))
    if job not in cluster:
        log("%s is not in the cluster spec: it serves nothing and dials no task (as TensorFlow's %s)" % (me, job))
        log("%s done: 0 peers" % me)
    else:
        if index not in cluster[job]:
            sys.exit("tf-probe: task %s has no address in the cluster spec" % me)
        _, port = split(cluster[job][index])
        threading.Thread(target=serve, args=(me, port), daemon=True).start()
        peers = {"%s:%d" % (j, i): a for j, t in cluster.items() for i, a in t.items() if (j, i) != (job, index)}
        pending, start, last = dict(peers), time.monotonic(), ""
        while pending:
            for peer, address in sorted(pending.items()):
                try:
                    answer = dial(address)
                except OSError as e:
                    last = "%s: %s" % (address, e)
                    continue
                if answer != peer:
                    sys.exit("tf-probe: %s answered as %r, but the cluster spec names %s there" % (address, answer, peer))
                log("%s reached %s at %s" % (me, peer, address))
                del pending[peer]
            if pending:
                if time.monotonic() - start > DEADLINE:
                    sys.exit("tf-probe: %s could not reach %s within %.0f s (last: %s)" % (
                        me, ", ".join(sorted(pending)), DEADLINE, last))
                time.sleep(1)
        log("%s done: reached all %d peers in %.1f s" % (me, len(peers), time.monotonic() - start))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
