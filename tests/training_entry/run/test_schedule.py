"""The learning-rate schedule: linear scaling with gradual warm-up, a pure function of the epoch."""

from __future__ import annotations

import pytest
import tensorflow as tf

from training_entry.run.callbacks import LearningRateSchedule
from training_entry.run.schedule import global_epoch, learning_rate


def test_warm_up_from_base_to_base_times_size():
    assert learning_rate(0.0, 0.001, 8, 5) == pytest.approx(0.001)
    assert learning_rate(2.5, 0.001, 8, 5) == pytest.approx(0.001 + 0.007 * 0.5)
    assert learning_rate(5.0, 0.001, 8, 5) == pytest.approx(0.008)
    assert learning_rate(9.3, 0.001, 8, 5) == pytest.approx(0.008)


def test_rises_every_step_and_never_overshoots():
    rates = [learning_rate(global_epoch(e, s, 10), 0.01, 4, 2) for e in range(4) for s in range(10)]
    assert all(a < b for a, b in zip(rates[:20], rates[1:21], strict=True))
    assert max(rates) == pytest.approx(0.04)
    assert rates[20:] == [pytest.approx(0.04)] * 20


def test_no_warm_up_or_one_worker():
    assert learning_rate(0.0, 0.001, 4, 0) == pytest.approx(0.004)
    assert learning_rate(0.3, 0.001, 1, 5) == pytest.approx(0.001)


def test_bad_arguments():
    with pytest.raises(ValueError, match="size must be at least 1"):
        learning_rate(0, 0.1, 0, 1)
    with pytest.raises(ValueError, match="steps_per_epoch must be at least 1"):
        global_epoch(0, 0, 0)


class _FakeModel:
    def __init__(self):
        self.optimizer = tf.keras.optimizers.legacy.Adam(learning_rate=123.0)
        self.optimizer._create_hypers()


def _run_epochs(callback, epochs, steps):
    seen = []
    for epoch in epochs:
        callback.on_epoch_begin(epoch)
        for step in range(steps):
            callback.on_train_batch_begin(step)
            seen.append(float(callback.model.optimizer.learning_rate.numpy()))
    return seen


def test_callback_sets_the_rate_every_step_and_a_resumed_run_continues_the_curve():
    full = LearningRateSchedule(0.001, 4, 2, steps_per_epoch=5)
    full.set_model(_FakeModel())
    uninterrupted = _run_epochs(full, range(4), 5)
    resumed = LearningRateSchedule(0.001, 4, 2, steps_per_epoch=5)
    resumed.set_model(_FakeModel())
    # Keras calls on_epoch_begin with the real epoch index when fit(initial_epoch=1).
    assert _run_epochs(resumed, range(1, 4), 5) == pytest.approx(uninterrupted[5:], rel=1e-6)
    assert uninterrupted[0] == pytest.approx(0.001)
    assert uninterrupted[-1] == pytest.approx(0.004)
