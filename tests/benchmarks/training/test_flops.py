"""FLOPs per training sample, counted from the graph, against counts made by hand."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from benchmarks.training import flops  # noqa: E402
from benchmarks.training.mfu import mfu  # noqa: E402


def test_a_dense_layer_is_2mn_plus_its_bias_forward_and_three_times_that_to_train():
    inputs = tf.keras.Input((64,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(10)(inputs))
    counted = flops.count(model)
    assert counted.forward == 2 * 64 * 10 + 10  # MatMul (a multiply and an add each) + BiasAdd
    assert counted.training == 3 * counted.forward  # backward: d(input) and d(weights)
    assert counted.parameters == 64 * 10 + 10


def test_layers_before_the_first_trainable_one_run_forward_only():
    inputs = tf.keras.Input((8,))
    frozen = tf.keras.layers.Dense(4, trainable=False)(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(frozen))
    counted = flops.count(model)
    first, head = 2 * 8 * 4 + 4, 2 * 4 * 2 + 2
    assert counted.forward == first + head
    assert counted.training == first + 3 * head
    assert counted.parameters == 4 * 2 + 2


def test_a_convolution_counts_every_output_pixel():
    inputs = tf.keras.Input((6, 6, 3))
    model = tf.keras.Model(inputs, tf.keras.layers.Conv2D(5, 3, padding="same", use_bias=False)(inputs))
    assert flops.count(model).forward == 2 * 6 * 6 * 3 * 3 * 3 * 5


def test_model_flop_utilisation():
    assert mfu(1e6, 1e3, 4e9) == pytest.approx(0.25)
    assert mfu(1e6, 1e3, 0.0) == 0.0
