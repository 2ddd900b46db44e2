"""Learning rate as a pure function of the global (fractional) epoch.

Horovod's linear scaling rule with gradual warm-up (Goyal et al. 2017, arXiv:1706.02677):
with ``size`` workers each averaging gradients over its own batch, the effective batch is
``size`` times larger, so the learning rate is ``base x size``. Jumping there at step 0 makes
early training unstable, so it ramps linearly from ``base`` (epoch 0) to ``base x size``
(epoch ``warmup_epochs``), updated every step, then stays there.

Because the rate depends only on the position in training and not on how many steps this
process has run, a job resumed from a checkpoint at epoch 3 gets exactly the rate an
uninterrupted job would have had there (horovod#88: the callback-state version had to be
patched by hand on resume). Standard library only; unit-tested without Horovod.
"""

from __future__ import annotations


def learning_rate(epoch: float, base: float, size: int, warmup_epochs: float) -> float:
    """The rate for the step at global epoch ``epoch`` (e.g. 2.5 = halfway through the third)."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    target = base * size
    if warmup_epochs <= 0 or epoch >= warmup_epochs:
        return target
    return base + (target - base) * (epoch / warmup_epochs)


def global_epoch(epoch: int, step: int, steps_per_epoch: int) -> float:
    """Fractional epoch of ``step`` (0-based) within ``epoch`` (0-based)."""
    if steps_per_epoch < 1:
        raise ValueError(f"steps_per_epoch must be at least 1, got {steps_per_epoch}")
    return epoch + step / steps_per_epoch
