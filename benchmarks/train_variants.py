"""``training_entry/train.py`` with one experimental change, for P1's --explore sweep only.

Changes that would live in the training code (not in the launch) are tried here without
touching it: ``TRAINPIPE_BENCH_VARIANT`` names them, comma separated.

- ``gc_freeze``: ``gc.collect(); gc.freeze()`` just before ``model.fit``: full collections
  then skip the ~10^6 objects TensorFlow and Keras created at start-up (a full collection
  on one rank stalls every rank at the next allreduce).
- ``group1``: ``hvd.DistributedOptimizer(..., num_groups=1)``: all gradients of a step in
  one grouped allreduce, negotiated once.

    python benchmarks/train_variants.py <train.py arguments>
"""

from __future__ import annotations

import gc
import os
import runpy
import sys
from pathlib import Path

TRAIN_PY = str(Path(__file__).resolve().parents[1] / "training_entry" / "train.py")
VARIANT_ENV = "TRAINPIPE_BENCH_VARIANT"


def main() -> None:
    variants = set(filter(None, os.environ.get(VARIANT_ENV, "").split(",")))
    if "gc_freeze" in variants:
        import tensorflow as tf

        fit = tf.keras.Model.fit

        def fit_frozen(self, *args, **kwargs):
            gc.collect()
            gc.freeze()
            return fit(self, *args, **kwargs)

        tf.keras.Model.fit = fit_frozen
    if "group1" in variants:
        import horovod.tensorflow.keras as hvd

        distributed = hvd.DistributedOptimizer

        def grouped(*args, **kwargs):
            return distributed(*args, **{**kwargs, "num_groups": 1})

        hvd.DistributedOptimizer = grouped
    sys.argv[0] = TRAIN_PY
    runpy.run_path(TRAIN_PY, run_name="__main__")


if __name__ == "__main__":
    main()
