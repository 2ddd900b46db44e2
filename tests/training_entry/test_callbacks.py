"""The metric line's step spread: what synchronised ranks wait for each other (issue 13)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import tensorflow as tf

from training_entry import contract
from training_entry.callbacks import MetricLine, step_spread


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
