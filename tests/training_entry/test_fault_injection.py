"""The test-only fault injector: off unless its variable names this rank (its end-to-end use is
test_train_mpirun.py's failing-rank test and tests/pipeline/local/test_end_to_end.py)."""

from __future__ import annotations

import pytest

from training_entry.fault_injection import FAIL_AT_STEP_ENV, FailAtStep, injected_failures


def test_fault_injection_hook():
    assert injected_failures(0, {}) == []
    assert injected_failures(0, {FAIL_AT_STEP_ENV: "1:3"}) == []
    (hook,) = injected_failures(1, {FAIL_AT_STEP_ENV: "1:3"})
    hook.on_train_batch_begin(0)
    hook.on_train_batch_begin(1)
    with pytest.raises(RuntimeError, match="injected failure before step 3"):
        hook.on_train_batch_begin(2)
    assert isinstance(hook, FailAtStep)
    with pytest.raises(ValueError, match="expected <rank>:<step>"):
        injected_failures(0, {FAIL_AT_STEP_ENV: "3"})
