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
    from the start of this job), i.e. before the call into the graph that would run it (a
    call runs ``steps_per_execution`` steps, fewer at an epoch's end)."""

    def __init__(self, step: int, steps_per_execution: int = 1):
        super().__init__()
        self.step = step
        self.steps_per_execution = steps_per_execution
        self.done = 0  # steps this job has run
        self.first = 0  # index of the running call's first step in its epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.first = batch
        steps_per_epoch = (getattr(self, "params", None) or {}).get("steps")
        size = self.steps_per_execution if not steps_per_epoch else min(self.steps_per_execution,
                                                                         steps_per_epoch - batch)
        if self.done < self.step <= self.done + size:
            raise RuntimeError(f"{FAIL_AT_STEP_ENV}: injected failure before step {self.step}")

    def on_train_batch_end(self, batch, logs=None):
        self.done += batch - self.first + 1  # Keras passes the call's last step


def injected_failures(rank: int, env=None, steps_per_execution: int = 1) -> list[tf.keras.callbacks.Callback]:
    """The hook for this rank when ``TRAINPIPE_TEST_FAIL_AT_STEP`` names it; none otherwise."""
    env = os.environ if env is None else env
    spec = env.get(FAIL_AT_STEP_ENV)
    if not spec:
        return []
    try:
        target_rank, step = (int(part) for part in spec.split(":"))
    except ValueError:
        raise ValueError(f"{FAIL_AT_STEP_ENV}={spec!r}: expected <rank>:<step>") from None
    return [FailAtStep(step, steps_per_execution)] if target_rank == rank else []
