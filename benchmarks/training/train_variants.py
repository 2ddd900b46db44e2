"""``training_entry/train.py`` with one experimental change, for the benchmarks only.

Changes that would live in the training code (not in the launch) are tried here without
touching it: ``TRAINPIPE_BENCH_VARIANT`` names them, comma separated. Used by P1's --explore
sweep and by ``benchmarks/training/mfu.py --compare`` (where the time goes).

- ``gc_freeze``: ``gc.collect(); gc.freeze()`` just before ``model.fit``: full collections
  then skip the ~10^6 objects TensorFlow and Keras created at start-up (a full collection
  on one rank stalls every rank at the next allreduce).
- ``group1``: ``hvd.DistributedOptimizer(..., num_groups=1)``: all gradients of a step in
  one grouped allreduce, negotiated once.
- ``one_batch``: the training dataset's first batch, cached and repeated (``take(1).cache()
  .repeat()``; the entrypoint passes ``steps_per_epoch``, so the epochs keep their length):
  the same steps with no input work (reading, parsing, shuffling, decoding, augmenting).
  What it gains over the unchanged run is the input's share of the step (benchmarks/training/mfu.py
  ``--compare no_input``). The model learns nothing useful from it; only the rate counts.

    python benchmarks/training/train_variants.py <train.py arguments>
"""

from __future__ import annotations

import gc
import os
import runpy
import sys
from pathlib import Path

TRAIN_PY = str(Path(__file__).resolve().parents[2] / "training_entry" / "train.py")
VARIANT_ENV = "TRAINPIPE_BENCH_VARIANT"


def main() -> None:
    patch(set(filter(None, os.environ.get(VARIANT_ENV, "").split(","))))
    sys.argv[0] = TRAIN_PY
    runpy.run_path(TRAIN_PY, run_name="__main__")


def patch(variants: set[str]) -> None:
    """Apply the named changes to TensorFlow / Horovod before the entrypoint imports them."""
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
    if "one_batch" in variants:
        import tensorflow as tf

        fit_all = tf.keras.Model.fit

        def fit_one_batch(self, x=None, *args, **kwargs):
            return fit_all(self, x.take(1).cache().repeat(), *args, **kwargs)

        tf.keras.Model.fit = fit_one_batch


if __name__ == "__main__":
    main()
