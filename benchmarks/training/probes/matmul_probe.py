"""An entry point for the training benchmarks' launches that measures achievable FLOP/s: the
denominator of model FLOP utilisation (``flops.py`` has the numerator).

Run by ``harness.training_job`` like ``train.py``, with the same launch (ranks, pinning,
thread variables) as the training run it is compared with, so the figure is what *that*
process setup can reach: each rank sets its threads as the entrypoint does
(``training_entry.run.runtime.set_threads_from_env``), then multiplies two dense fp32
``SIZE`` x ``SIZE`` matrices in a loop inside one ``tf.function`` (no per-op dispatch), all
ranks at once (an allreduce before each timed pass lines them up). A matmul counts 2 x SIZE^3
FLOPs. Rank 0 prints the sum over the ranks as the metric line the harness parses
(FLOP/s in the ``samples_per_sec`` field), one line per pass; the harness takes the median
of the passes after the first.

Why a large square matmul: it is the kernel with the highest FLOP/s the library reaches on
this CPU (blocked to stay in cache, vectorised), so it stands for "the hardware's limit as
TensorFlow sees it", not for the model's own kernel mix. Why 2048: on the 2-core EPYC VM
(quiet, 3 interleaved passes each) one thread reached 104-107 GFLOP/s at 1024, 107-109 at 2048
and 109-111 at 3072; two threads 173-208, 204-215 and 215-218. 1024 was up to ~10% below the
plateau, which flattered every MFU by as much; 2048 is within ~2% of it at a quarter of
3072's memory.
"""

from __future__ import annotations

import os
import sys
import time

SIZE_ENV = "PROBE_MATMUL_SIZE"
SECONDS_ENV = "PROBE_MATMUL_SECONDS"
DEFAULT_SIZE = 2048
PASSES = 4


def main() -> int:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from training_entry.run import runtime

    hvd.init()
    runtime.set_threads_from_env()
    size = int(os.environ.get(SIZE_ENV, DEFAULT_SIZE))
    a = tf.random.stateless_normal([size, size], seed=[1, hvd.rank()], dtype=tf.float32)
    b = tf.random.stateless_normal([size, size], seed=[2, hvd.rank()], dtype=tf.float32)

    @tf.function
    def products(a, b, n):
        # Each product feeds the next (scaled to stay finite), so none can be skipped.
        x = a
        for _ in tf.range(n):
            x = tf.linalg.matmul(x, b) * (1.0 / size)
        return tf.reduce_sum(x)

    products(a, b, tf.constant(2)).numpy()  # trace and warm up
    started = time.perf_counter()
    products(a, b, tf.constant(4)).numpy()
    per_product = max((time.perf_counter() - started) / 4, 1e-6)
    # Every rank runs the same count (rank 0's estimate), about SECONDS per pass.
    n = int(hvd.broadcast(tf.constant(max(3, int(float(os.environ.get(SECONDS_ENV, "1.5")) / per_product))), 0))
    for epoch in range(1, PASSES + 1):
        hvd.allreduce(tf.constant(0.0), op=hvd.Sum).numpy()  # every rank starts together
        started = time.perf_counter()
        products(a, b, tf.constant(n)).numpy()
        rate = 2.0 * size ** 3 * n / (time.perf_counter() - started)
        total = float(hvd.allreduce(tf.constant(rate, tf.float64), op=hvd.Sum))
        if hvd.rank() == 0:
            print(f"trainpipe-metrics epoch={epoch} samples_per_sec={total:.6g} "
                  f"gflops_per_rank={rate / 1e9:.3f} matmul_size={size}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
