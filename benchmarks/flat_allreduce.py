"""Experiment (not adopted): a small model's gradients reduced as one flat tensor, one allreduce.

``hvd.DistributedOptimizer`` gives Horovod one allreduce operation per gradient tensor.
Tensor fusion packs them into one buffer for the wire, but Horovod still enqueues,
negotiates, copies and calls back each operation: in ``advisor_probe.py`` the same bytes as 8
tensors cost 10-30 us per extra tensor over 1 tensor (a ``tf.function`` doing nothing else).
This concatenates a small, dense, single-dtype gradient into one vector, reduces it with one
``hvd.allreduce`` (same average, same compression) and splits it back; anything else (one
rank, ``IndexedSlices``, ``None``, mixed dtypes, unknown shapes, over ``MAX_FLAT_BYTES``)
goes through Horovod's own function.

Measured in training (``benchmarks/notes.md``, P1): the digits MLP's 1x2 step did not get
faster (16 alternated jobs, medians 1.57 ms without, 1.71 ms with, within the noise), so the
training entrypoint keeps Horovod's per-tensor path. Kept here, behind ``train_variants.py``'s
``flat`` variant, so that it can be measured again on other models and machines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import horovod.tensorflow as hvd
import tensorflow as tf

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


def flat_allreduce_fn(per_tensor: AllreduceGrads, compression, max_bytes: int = MAX_FLAT_BYTES) -> AllreduceGrads:
    """Horovod's ``(grads, vars) -> grads`` function, one flat allreduce where ``flattenable``."""

    def allreduce_grads(grads, variables):
        grads = list(grads)
        # Horovod: one rank reduces nothing; Horovod's function then skips the collective.
        if hvd.size() < 2 or not flattenable(grads, max_bytes):
            return per_tensor(grads, variables)
        sizes = [g.shape.num_elements() for g in grads]
        flat = tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)
        # Horovod: the average over every rank, as DistributedOptimizer's default op.
        reduced = hvd.allreduce(flat, op=hvd.Average, compression=compression)
        return [tf.reshape(part, g.shape) for part, g in zip(tf.split(reduced, sizes), grads, strict=True)]

    return allreduce_grads


def install(optimizer, compression, max_bytes: int = MAX_FLAT_BYTES) -> bool:
    """Route ``optimizer``'s (an ``hvd.DistributedOptimizer``) gradient reduction through
    ``flat_allreduce_fn``. False (nothing changed) if this Horovod has no such hook."""
    per_tensor = getattr(optimizer, HOROVOD_HOOK, None)
    if per_tensor is None:
        return False
    setattr(optimizer, HOROVOD_HOOK, flat_allreduce_fn(per_tensor, compression, max_bytes))
    return True
