"""Allreduce probe for the scaling advisor's calibration (run by every rank under mpirun).

Times Horovod allreduces of float32 tensors of a few sizes, inside a ``tf.function`` as the
training step runs them, after a warm-up; rank 0 prints one ``advisor-probe bytes=N
seconds=S`` line per size (the median over repetitions), one ``advisor-probe compute
alone=S together=S`` line (a fixed kernel on rank 0 with the other ranks idle, then on every
rank at once: the compute contention of ranks sharing the machine) and a ``trainpipe-metrics``
line so the benchmark harness accepts the job.

    mpirun -np 2 python benchmarks/advisor_probe.py --sizes 4096 65536 1048576 --repeats 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import horovod.tensorflow as hvd
import tensorflow as tf

SIZES_ENV = "TRAINPIPE_PROBE_SIZES"  # how the benchmark passes sizes through the launch


def _median_call(fn, x, repeats: int) -> float:
    for _ in range(10):
        fn(x).numpy()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn(x).numpy()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def compute_contention(repeats: int = 100) -> tuple[float, float]:
    """Seconds of a fixed dense kernel on rank 0 while the other ranks sleep, and while every
    rank runs it at once (Horovod's background threads cycling throughout): what ranks that
    share a machine cost each other's compute (cores, caches, memory bandwidth)."""
    x = tf.random.normal([192, 192], seed=1)

    @tf.function
    def work(y):
        for _ in range(8):
            y = tf.tanh(tf.matmul(y, y) * 1e-2)
        return y

    sync = tf.zeros([1])
    hvd.allreduce(sync)
    alone = _median_call(work, x, repeats) if hvd.rank() == 0 else 0.0
    hvd.allreduce(sync)  # the others wait here (Horovod yields while waiting)
    together = _median_call(work, x, repeats)
    hvd.allreduce(sync)
    return alone, together


def main() -> None:
    parser = argparse.ArgumentParser()
    sizes = os.environ.get(SIZES_ENV, "4096 65536 262144 1048576")
    parser.add_argument("--sizes", type=int, nargs="+", default=[int(s) for s in sizes.split()])
    parser.add_argument("--repeats", type=int, default=200)
    args, _ = parser.parse_known_args()  # the harness passes training hyperparameters too
    hvd.init()
    alone, together = compute_contention()
    if hvd.rank() == 0:
        print(f"advisor-probe compute alone={alone:.6g} together={together:.6g}", flush=True)
    for size in args.sizes:
        tensor = tf.ones([max(size // 4, 1)], tf.float32)

        @tf.function
        def step(x):
            return hvd.allreduce(x, op=hvd.Average)

        for _ in range(20):
            step(tensor)
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            step(tensor).numpy()
            times.append(time.perf_counter() - started)
        if hvd.rank() == 0:
            print(f"advisor-probe bytes={size} seconds={statistics.median(times):.6g}", flush=True)
    # Eager tf.function call overhead alone (the same call without the collective), to subtract.
    tensor = tf.ones([1], tf.float32)

    @tf.function
    def nothing(x):
        return x + 0.0

    for _ in range(20):
        nothing(tensor)
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        nothing(tensor).numpy()
        times.append(time.perf_counter() - started)
    if hvd.rank() == 0:
        print(f"advisor-probe bytes=0 seconds={statistics.median(times):.6g}", flush=True)
        print("trainpipe-metrics epoch=1 samples_per_sec=1", flush=True)


if __name__ == "__main__":
    main()
