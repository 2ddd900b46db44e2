"""Allreduce probe for the scaling advisor's calibration (run by every rank under mpirun).

Times Horovod allreduces of float32 tensors of a few sizes, inside a ``tf.function`` as the
training step runs them, after a warm-up; rank 0 prints one ``advisor-probe bytes=N
seconds=S`` line per size (the median over repetitions) and a ``trainpipe-metrics`` line so
the benchmark harness accepts the job.

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


def main() -> None:
    parser = argparse.ArgumentParser()
    sizes = os.environ.get(SIZES_ENV, "4096 65536 262144 1048576")
    parser.add_argument("--sizes", type=int, nargs="+", default=[int(s) for s in sizes.split()])
    parser.add_argument("--repeats", type=int, default=200)
    args, _ = parser.parse_known_args()  # the harness passes training hyperparameters too
    hvd.init()
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
