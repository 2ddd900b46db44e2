"""Allreduce probe for the scaling advisor's calibration (run by every rank under mpirun).

Times Horovod allreduces of float32 tensors of a few sizes, inside a ``tf.function`` as the
training step runs them, after a warm-up; rank 0 prints one ``advisor-probe bytes=N
seconds=S`` line per size (the median over repetitions), one ``advisor-probe compute
alone=S together=S`` line (a fixed convolution + dense kernel on rank 0 before Horovod starts,
the other ranks asleep, then on every rank at once under Horovod: the compute contention of
ranks sharing the machine) and a ``trainpipe-metrics``
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


def _kernel():
    """A fixed step-like kernel: a 3x3 convolution stack (the CNN's kind of work) and dense
    layers (the MLP's), forward only, on one thread's worth of data."""
    images = tf.random.normal([8, 32, 32, 16], seed=1)
    filters = tf.random.normal([3, 3, 16, 16], seed=2) * 0.1
    dense = tf.random.normal([192, 192], seed=3) * 0.1

    @tf.function
    def work(x):
        y = x
        for _ in range(3):
            y = tf.nn.relu(tf.nn.conv2d(y, filters, 1, "SAME"))
        flat = tf.reshape(y[:, :12, :12, :], [-1, 192])[:192]
        for _ in range(4):
            flat = tf.tanh(tf.matmul(flat, dense))
        return tf.reduce_sum(flat) + tf.reduce_sum(y)

    return work, images


ALONE_SECONDS = 3.0  # the other ranks sleep this long before starting Horovod


def compute_alone(repeats: int) -> float:
    """Seconds of the kernel on global rank 0 before Horovod starts, while the other ranks
    sleep: the process as the 1-rank calibration run has it (no peer, no negotiation). Must
    run before ``hvd.init()``."""
    if os.environ.get("OMPI_COMM_WORLD_RANK", "0") != "0":
        time.sleep(ALONE_SECONDS)
        return 0.0
    work, images = _kernel()
    started = time.perf_counter()
    for _ in range(10):
        work(images).numpy()
    one = (time.perf_counter() - started) / 10
    return _median_call(work, images, max(10, min(repeats, int(0.6 * ALONE_SECONDS / max(one, 1e-6)))))


def compute_together(repeats: int) -> float:
    """Seconds of the same kernel on every rank at once, Horovod's background threads
    negotiating every cycle as in training: what a rank's compute costs in a multi-rank job
    (shared caches and memory bandwidth, the layout's MPI progress) over ``compute_alone``.
    (Timing rank 0 alone after ``hvd.init()``, the others blocked in a collective, measured
    rank 0 *slower* alone than together, 0.74-0.98 at 1x2: the others' pending request is
    negotiated on rank 0's core every cycle.)"""
    work, images = _kernel()
    sync = tf.zeros([1])
    hvd.allreduce(sync)
    together = _median_call(work, images, repeats)
    hvd.allreduce(sync)
    return together


def main() -> None:
    parser = argparse.ArgumentParser()
    sizes = os.environ.get(SIZES_ENV, "4096 65536 262144 1048576")
    parser.add_argument("--sizes", type=int, nargs="+", default=[int(s) for s in sizes.split()])
    parser.add_argument("--repeats", type=int, default=200)
    args, _ = parser.parse_known_args()  # the harness passes training hyperparameters too
    alone = compute_alone(100)
    hvd.init()
    together = compute_together(100)
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
