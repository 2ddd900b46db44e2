"""A small model's gradients averaged as one flat tensor: one Horovod allreduce per step.

``hvd.DistributedOptimizer`` gives Horovod one allreduce operation per gradient tensor.
Tensor fusion packs them into one buffer for the wire, but Horovod still enqueues,
negotiates, copies and calls back each operation: in ``benchmarks/advisor_probe.py`` the same
bytes as 8 tensors cost 10-30 us per extra tensor over 1 tensor. This concatenates a small,
dense, single-dtype gradient into one vector, reduces it with one ``hvd.allreduce`` (same
average, same compression) and splits it back; anything else (``IndexedSlices``, ``None``,
mixed dtypes, unknown shapes, over ``MAX_FLAT_BYTES``, where overlapping each tensor's
allreduce with the rest of the backward pass matters more) goes through Horovod's own
function, as does a job of one rank (Horovod skips the collective there).

Measured (``benchmarks/notes.md``, P1): with StepsPerExecution 16 the digits MLP's 2-rank
job ran 1.10x faster with it (139-144k against 122-128k samples/s). At one step per call
the gain was lost in Keras' dispatch noise, which is why it was first left out (stop 18).
``TRAINPIPE_FLAT_ALLREDUCE=0`` in the job's environment keeps Horovod's per-tensor path.

Python 3.10 syntax.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import horovod.tensorflow as hvd
import tensorflow as tf

from training_entry.contract import FLAT_ALLREDUCE_ENV

# Above this many gradient bytes (1M float32 parameters) Horovod's per-tensor path is kept.
MAX_FLAT_BYTES = 4 * 1024 * 1024
# The attribute hvd.DistributedOptimizer (horovod/_keras, 0.28) calls with (grads, vars).
HOROVOD_HOOK = "_allreduce_grads"

AllreduceGrads = Callable[[Sequence, Sequence], list]


def flattenable(grads: Sequence, max_bytes: int = MAX_FLAT_BYTES) -> bool:
    """Dense tensors of one floating dtype, shapes known, at most ``max_bytes`` in all."""
    if len(grads) < 2 or not all(isinstance(g, tf.Tensor) for g in grads):
        return False  # None, IndexedSlices, or nothing to gain from one tensor
    dtypes = {g.dtype for g in grads}
    if len(dtypes) != 1 or not next(iter(dtypes)).is_floating:
        return False
    if not all(g.shape.is_fully_defined() for g in grads):
        return False
    return sum(g.shape.num_elements() * g.dtype.size for g in grads) <= max_bytes


class FlatAllreduce:
    """Horovod's ``(grads, vars) -> grads`` function, one flat allreduce where ``flattenable``.

    ``operations``: the allreduce operations a step of several ranks issues (1 when
    flattened, else one per gradient), set when the step is traced, on one rank too; the
    metric line reports it as ``gradient_tensors`` for the scaling advisor."""

    def __init__(self, per_tensor: AllreduceGrads, compression, max_bytes: int = MAX_FLAT_BYTES):
        self.per_tensor = per_tensor
        self.compression = compression
        self.max_bytes = max_bytes
        self.operations: int | None = None

    def __call__(self, grads, variables):
        grads = list(grads)
        flat = flattenable(grads, self.max_bytes)
        self.operations = 1 if flat else sum(g is not None for g in grads)
        # Horovod: one rank reduces nothing; Horovod's function then skips the collective.
        if hvd.size() < 2 or not flat:
            return self.per_tensor(grads, variables)
        sizes = [g.shape.num_elements() for g in grads]
        joined = tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)
        # Horovod: the average over every rank, as DistributedOptimizer's default op.
        reduced = hvd.allreduce(joined, op=hvd.Average, compression=self.compression)
        return [tf.reshape(part, g.shape) for part, g in zip(tf.split(reduced, sizes), grads, strict=True)]


def enabled(env=None) -> bool:
    """On unless ``TRAINPIPE_FLAT_ALLREDUCE=0`` (to measure Horovod's per-tensor path)."""
    env = os.environ if env is None else env
    return env.get(FLAT_ALLREDUCE_ENV, "1").strip() != "0"


def install(optimizer, compression, max_bytes: int = MAX_FLAT_BYTES) -> FlatAllreduce | None:
    """Route ``optimizer``'s (an ``hvd.DistributedOptimizer``) gradient reduction through
    ``FlatAllreduce``. None (nothing changed) if this Horovod has no such hook."""
    per_tensor = getattr(optimizer, HOROVOD_HOOK, None)
    if per_tensor is None:
        return None
    reducer = FlatAllreduce(per_tensor, compression, max_bytes)
    setattr(optimizer, HOROVOD_HOOK, reducer)
    return reducer
