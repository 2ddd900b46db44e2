"""The test-only fault injector: off unless its variable names this rank (its end-to-end use is
test_train_mpirun.py's failing-rank test and tests/pipeline/local/test_end_to_end.py)."""

from __future__ import annotations

import pytest

from training_entry.run.fault_injection import FAIL_AT_STEP_ENV, FailAtStep, injected_failures


def test_fault_injection_hook():
    assert injected_failures(0, {}) == []
    assert injected_failures(0, {FAIL_AT_STEP_ENV: "1:3"}) == []
    (hook,) = injected_failures(1, {FAIL_AT_STEP_ENV: "1:3"})
    for step in (0, 1):
        hook.on_train_batch_begin(step)
        hook.on_train_batch_end(step)
    with pytest.raises(RuntimeError, match="injected failure before step 3"):
        hook.on_train_batch_begin(2)
    assert isinstance(hook, FailAtStep)
    with pytest.raises(ValueError, match="expected <rank>:<step>"):
        injected_failures(0, {FAIL_AT_STEP_ENV: "3"})


def test_several_steps_per_call_fail_before_the_call_that_runs_the_step():
    """Keras passes a call's first step to batch_begin and its last to batch_end; steps are
    counted over the job, across epochs (each epoch's indices start at 0)."""
    (hook,) = injected_failures(0, {FAIL_AT_STEP_ENV: "0:12"}, steps_per_execution=4)
    hook.set_params({"steps": 10})  # calls of 4, 4, 2 steps per epoch
    for first, last in ((0, 3), (4, 7), (8, 9)):  # job steps 1..10
        hook.on_train_batch_begin(first)
        hook.on_train_batch_end(last)
    with pytest.raises(RuntimeError, match="injected failure before step 12"):
        hook.on_train_batch_begin(0)  # the second epoch's first call runs job steps 11..14
