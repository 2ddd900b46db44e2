"""An entry point for P1's launches that times Horovod allreduces instead of training.

Run by ``harness.training_job`` like ``train.py`` (it ignores the hyperparameters): each rank
allreduces one tensor the size of the digits MLP's gradients (~44 KB) ``PROBE_OPS`` times
per "epoch" and rank 0 prints the rate as the metric line P1 parses (allreduces/s in the
``samples_per_sec`` field). Comparing the 1x2 and 2x1 launches shows what the transport
between the ranks costs per step: inside one simulated host Open MPI uses shared memory
(vader); between simulated hosts, TCP over loopback (see BENCHMARKS.md, P1).
"""

from __future__ import annotations

import os
import sys
import time

OPS_ENV = "PROBE_OPS"
GRADIENT_FLOATS = 11_000  # 64x128 + 128 + 128x10 + 10 weights of the MLP, rounded


def main() -> int:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    tensor = tf.ones([GRADIENT_FLOATS], tf.float32)

    @tf.function
    def allreduce(x):
        return hvd.allreduce(x, op=hvd.Sum)

    for _ in range(50):  # trace and warm up
        allreduce(tensor)
    ops = int(os.environ.get(OPS_ENV, "400"))
    for epoch in range(1, 4):
        started = time.perf_counter()
        for _ in range(ops):
            allreduce(tensor)
        seconds = time.perf_counter() - started
        if hvd.rank() == 0:
            print(f"trainpipe-metrics epoch={epoch} samples_per_sec={ops / seconds:.1f} "
                  f"ms_per_allreduce={1000 * seconds / ops:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
