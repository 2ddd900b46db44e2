"""The PyTorch networks start as Keras' layers do (``networks.keras_init``), so the two rooms
train the same architecture from the same kind of start."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from training_torch import networks


def _fans(weight: torch.Tensor) -> tuple[int, int]:
    receptive = weight[0][0].numel() if weight.dim() > 2 else 1
    return weight.shape[1] * receptive, weight.shape[0] * receptive


@pytest.mark.parametrize("build", [lambda: networks.small_cnn(10), lambda: networks.mlp(13, 3)],
                         ids=["small_cnn", "mlp"])
def test_weights_are_glorot_uniform_and_biases_zero_as_in_keras(build):
    torch.manual_seed(0)
    layers = [m for m in build().modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    assert layers
    for layer in layers:
        fan_in, fan_out = _fans(layer.weight)
        limit = math.sqrt(6.0 / (fan_in + fan_out))  # Keras' glorot_uniform
        largest = float(layer.weight.detach().abs().max())
        # Inside the limit, and filling it: PyTorch's default (1/sqrt(fan_in)) passes the first
        # check for wide layers but not the second, and exceeds the limit for narrow ones.
        assert largest <= limit, (layer, largest, limit)
        assert largest >= 0.9 * limit, (layer, largest, limit)
        assert float(layer.bias.detach().abs().max()) == 0.0, layer
