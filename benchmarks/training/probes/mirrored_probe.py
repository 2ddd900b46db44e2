"""What one MultiWorkerMirrored allreduce costs inside a training step, against the same
allreduce alone (issue 25: why mirrored trails Horovod on the small CNN).

Starts two local workers (TF_CONFIG on 127.0.0.1, one intra-op and one inter-op thread each,
as the local runner's mirrored hosts on 2 cores) and, in each, times three loops of 16
steps per call, interleaved ``--repeats`` times:

- ``bare``: the allreduce alone, one after another (what a collective probe measures);
- ``compute``: a step-shaped kernel alone (``--matmuls`` 256x256 matmuls in a chain);
- ``step``: the kernel, then the allreduce of a ``--floats`` tensor, which the next step's
  kernel waits for (the shape of a synchronous training step).

``step - compute`` is what the allreduce adds to a step; beside ``bare`` it shows whether a
collective costs more inside a step than alone. Best of the repetitions (noise only slows).
Horovod's counterpart is the advisor probe's step-shaped loop (``benchmarks/advisor/advisor_probe.py``).

    .venv/bin/python -m benchmarks.training.probes.mirrored_probe [--floats 1 94538] [--matmuls 20] [--repeats 4]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

from benchmarks import harness as h

STEPS_PER_CALL = 16
SIZE_LABELS = {1: "one_float", 94538: "cnn"}  # RESULT names; 94538: the small CNN's parameters
CALLS = 5  # per timing


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def worker(index: int, ports: list[int], floats: int, matmuls: int, repeats: int) -> None:
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}})
    import tensorflow as tf

    # MultiWorkerMirrored: the local runner's threads for a host on 2 cores (tuning.py).
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    a = tf.random.normal([256, 256], seed=1)
    x = tf.ones([floats])

    def loop(mode: str):
        @tf.function
        def call():
            def replica(v):
                ctx = tf.distribute.get_replica_context()
                m = a
                for _ in range(STEPS_PER_CALL):
                    if mode != "bare":
                        for _ in range(matmuls):
                            # A chain on v, so that neither side can run ahead of the other.
                            m = tf.matmul(m, a) * 0.001 + v[0] * 1e-30
                        v = v + tf.reduce_sum(m) * 1e-30
                    if mode != "compute":
                        v = ctx.all_reduce("sum", v) * 0.5
                return v
            return strategy.run(replica, args=(x,))
        return call

    calls = {mode: loop(mode) for mode in ("bare", "compute", "step")}
    for call in calls.values():
        call()  # trace, and the collectives' first exchange
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):
        for mode, call in calls.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(CALLS):
                call()
            steps = CALLS * STEPS_PER_CALL
            figure = ((time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps)
            if mode not in best or figure[0] < best[mode][0]:
                best[mode] = figure
    if index == 0:
        print(json.dumps({mode: {"ms": w * 1e3, "cpu_ms": c * 1e3} for mode, (w, c) in best.items()}), flush=True)


def measure(floats: int, matmuls: int, repeats: int) -> dict:
    ports = _free_ports(2)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    argv = [sys.executable, "-m", "benchmarks.training.probes.mirrored_probe", "--floats", str(floats), "--matmuls", str(matmuls),
            "--repeats", str(repeats), "--ports", *map(str, ports), "--worker"]
    procs = [subprocess.Popen([*argv, str(i)], cwd=h.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        if p.returncode != 0:
            raise RuntimeError(f"mirrored probe worker failed ({p.returncode}):\n{err[-2000:]}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.training.probes.mirrored_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--floats", type=int, nargs="+", default=[1, 94538],
                        help="allreduced floats (94538: the small CNN's gradients)")
    parser.add_argument("--matmuls", type=int, default=20, help="256x256 matmuls per step")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--ports", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.ports, args.floats[0], args.matmuls, args.repeats)
        return 0
    print(f"MultiWorkerMirrored allreduce, 2 local workers, {args.matmuls} matmuls per step, "
          f"best of {args.repeats} (ms per step; CPU ms per step of worker 0)")
    print(f"  {'floats':>8s} {'bare':>7s} {'compute':>8s} {'step':>7s} {'in step':>8s} {'x bare':>7s} {'CPU added':>9s}")
    results = []
    for floats in args.floats:
        r = measure(floats, args.matmuls, args.repeats)
        added = r["step"]["ms"] - r["compute"]["ms"]
        print(f"  {floats:8d} {r['bare']['ms']:7.2f} {r['compute']['ms']:8.2f} {r['step']['ms']:7.2f} "
              f"{added:8.2f} {added / r['bare']['ms']:7.1f} {r['step']['cpu_ms'] - r['compute']['cpu_ms']:9.2f}",
              flush=True)
        label = SIZE_LABELS.get(floats, f"f{floats}")
        results += [(f"mirrored_allreduce_bare_ms_{label}", r["bare"]["ms"]),
                    (f"mirrored_allreduce_in_step_ms_{label}", added),
                    (f"mirrored_allreduce_in_step_vs_bare_{label}", added / r["bare"]["ms"])]
    print("  (in step: step - compute, what the allreduce adds to a step; x bare: that over the bare allreduce)")
    for name, value in results:
        h.result(name, value, "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
