"""The metric line's step spread (what synchronised ranks wait for each other, issue 13) and the
learning-rate schedule, with one step and with several steps per call into the graph."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import tensorflow as tf

from training_entry import contract
from training_entry.run.callbacks import (
    LearningRateSchedule,
    MetricLine,
    execution_step_spread,
    step_spread,
)


def test_step_spread_is_half_the_mean_absolute_difference_of_two_steps_the_first_left_out():
    # The first step (the input pipeline's start, paid by every rank at once) does not count.
    assert step_spread([9.0, 1.0, 3.0]) == pytest.approx(1.0)  # |1 - 3| / 2
    assert step_spread([9.0, 2.0, 1.0, 3.0]) == pytest.approx((1 + 2 + 1) / 3 / 2)
    assert step_spread([9.0, 5.0, 5.0, 5.0]) == 0.0  # steps alike: nobody waits
    assert step_spread([9.0, 1.0]) is None and step_spread([]) is None
    rng = random.Random(3)
    steps = [rng.lognormvariate(-7, 0.3) for _ in range(60)]
    pairs = [abs(a - b) for a, b in itertools.combinations(steps[1:], 2)]
    assert step_spread(steps) == pytest.approx(sum(pairs) / len(pairs) / 2)


def test_the_metric_line_carries_the_epochs_step_spread(capsys):
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(4,))])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((40, 4), np.float32), np.zeros((40, 3), np.float32)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[MetricLine(4, 10)])
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(contract.METRIC_LINE_PREFIX)]
    metrics = contract.parse_metric_line(line)
    assert 0 < metrics["step_spread"] < metrics["step_time"] * 10, line


def test_spread_of_calls_of_several_steps_is_the_spread_of_their_mean_step_times_sqrt_k():
    # One step per call: step_spread itself.
    calls = [(9.0, 1), (1.0, 1), (3.0, 1)]
    assert execution_step_spread(calls) == step_spread([9.0, 1.0, 3.0])
    # Calls of 4 steps: means 2.25 (first call, left out), 0.25, 0.75; the short last call too.
    calls = [(9.0, 4), (1.0, 4), (3.0, 4), (100.0, 2)]
    assert execution_step_spread(calls) == pytest.approx(step_spread([2.25, 0.25, 0.75]) * 2)
    assert execution_step_spread([(1.0, 4), (3.0, 2)]) is None and execution_step_spread([]) is None
    # Independent steps: the estimate recovers the single-step figure from calls of 16.
    rng = random.Random(5)
    steps = [rng.gauss(1e-3, 1e-4) for _ in range(16 * 400)]
    calls = [(sum(steps[i:i + 16]), 16) for i in range(0, len(steps), 16)]
    assert execution_step_spread(calls) == pytest.approx(step_spread(steps), rel=0.1)


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_metric_line_and_schedule_with_several_steps_per_call(capsys, steps_per_execution):
    """40 samples in batches of 4: 10 steps a epoch, run as calls of 4, 4 and 2 steps. The rate
    is set before each call from its first step's place in the warm-up (2 epochs here)."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(4,))])
    model.compile(optimizer=tf.keras.optimizers.legacy.SGD(0.1), loss="mse",
                  steps_per_execution=steps_per_execution)
    x, y = np.ones((40, 4), np.float32), np.zeros((40, 3), np.float32)
    schedule = LearningRateSchedule(0.1, size=2, warmup_epochs=2, steps_per_epoch=10)
    seen = []

    class Rates(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(round(float(self.model.optimizer.learning_rate.numpy()), 6))

    model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[schedule, Rates(), MetricLine(4, 10)])
    first_steps = [0, 4, 8] if steps_per_execution == 4 else list(range(10))
    assert seen == [round(0.1 + 0.1 * (epoch + step / 10) / 2, 6) for epoch in (0, 1) for step in first_steps]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(contract.METRIC_LINE_PREFIX)]
    metrics = [contract.parse_metric_line(line) for line in lines]
    assert len(metrics) == 2 and all(m["step_time"] > 0 for m in metrics)
    if steps_per_execution == 1:
        assert all(m["step_spread"] > 0 for m in metrics)
    else:  # 2 full calls an epoch, the first left out: no spread, and none invented
        assert all("step_spread" not in m for m in metrics)
