"""Test-only fault injection: make one rank raise before a given training step, so that the
crash handling (failure file, mpirun ending every rank, the job's FailureReason) is tested on
the real entry point. Off unless ``TRAINPIPE_TEST_FAIL_AT_STEP`` is set.

Python 3.10 syntax.
"""

from __future__ import annotations

import os

import tensorflow as tf

FAIL_AT_STEP_ENV = "TRAINPIPE_TEST_FAIL_AT_STEP"  # "<rank>:<step>", tests only


class FailAtStep(tf.keras.callbacks.Callback):
    """Test hook: raise before this process's ``step``-th training step (1-based, counted
    from the start of this job)."""

    def __init__(self, step: int):
        super().__init__()
        self.step = step
        self.count = 0

    def on_train_batch_begin(self, batch, logs=None):
        self.count += 1
        if self.count == self.step:
            raise RuntimeError(f"{FAIL_AT_STEP_ENV}: injected failure before step {self.step}")


def injected_failures(rank: int, env=None) -> list[tf.keras.callbacks.Callback]:
    """The hook for this rank when ``TRAINPIPE_TEST_FAIL_AT_STEP`` names it; none otherwise."""
    env = os.environ if env is None else env
    spec = env.get(FAIL_AT_STEP_ENV)
    if not spec:
        return []
    try:
        target_rank, step = (int(part) for part in spec.split(":"))
    except ValueError:
        raise ValueError(f"{FAIL_AT_STEP_ENV}={spec!r}: expected <rank>:<step>") from None
    return [FailAtStep(step)] if target_rank == rank else []
