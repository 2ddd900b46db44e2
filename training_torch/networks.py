"""The PyTorch models, the same shapes as TensorFlow's (``training_entry/model``): an MLP of
128 and 64 units with dropout 0.2 for a table, a three-block CNN for images. Each takes raw
input: a table's standardisation (the train split's mean and deviation, from the manifest) and
an image's scaling to [0, 1] are layers inside, so the exported model answers raw rows and pixels.

They start as Keras' layers start (``keras_init``: Glorot-uniform weights, zero biases), not at
PyTorch's default (Kaiming-uniform with a = sqrt(5), whose limit is 1/sqrt(fan_in)): with
PyTorch's, the same CNN on the same digits was at 0.77 validation accuracy after 5 epochs where
Keras' start reached 0.90 (one process, batch 64, the rooms' Adam and warm-up; the DDP-vs-Horovod
benchmark had shown 0.748 against 0.885), so a user switching framework would have met a worse
model for no reason of theirs.

``stages`` is how GPipe-style strategies cut a network: a list of consecutive ``nn.Module``s
whose composition is the network."""

from __future__ import annotations

import torch
from torch import nn

from training_torch.plan import CNN_FILTERS, HIDDEN_UNITS, stages_error

DROPOUT = 0.2


def keras_init(module: nn.Module) -> None:
    """Keras' defaults for Dense and Conv2D (glorot_uniform kernels, zeros biases), for ``apply``."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class Standardize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        # A constant column has deviation 0: divide by 1 instead (the column carries nothing).
        self.register_buffer("std", torch.tensor([s if s > 0 else 1.0 for s in std], dtype=torch.float32))

    def forward(self, x):
        return (x - self.mean) / self.std


class Pixels(nn.Module):
    """uint8-range HWC pixels (what a decoded JPEG gives) -> [0, 1] NCHW."""

    def forward(self, x):
        return x.permute(0, 3, 1, 2).float() / 255.0


def mlp(num_features: int, num_classes: int, mean=None, std=None) -> nn.Sequential:
    layers: list[nn.Module] = [Standardize(mean, std)] if mean is not None and std is not None else []
    width = num_features
    for units in HIDDEN_UNITS:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(DROPOUT)]
        width = units
    model = nn.Sequential(*layers, nn.Linear(width, num_classes))
    model.apply(keras_init)
    return model


def small_cnn(num_classes: int) -> nn.Sequential:
    layers: list[nn.Module] = [Pixels()]
    channels = 3
    for filters in CNN_FILTERS:
        layers += [nn.Conv2d(channels, filters, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        channels = filters
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(DROPOUT),
                          nn.Linear(channels, num_classes))
    model.apply(keras_init)
    return model


def stages(model: nn.Sequential, count: int) -> list[nn.Sequential]:
    """``model`` cut into ``count`` consecutive stages of about equal parameter counts (a cut
    never splits a layer); ValueError where the model has fewer parameterised layers than that."""
    layers = list(model)
    weights = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    heavy = [i for i, w in enumerate(weights) if w]
    if count < 1 or len(heavy) < count:
        raise ValueError(stages_error(len(heavy), count))
    total, cuts, running = sum(weights), [], 0
    for i, w in enumerate(weights):
        running += w
        if len(cuts) < count - 1 and running >= total * (len(cuts) + 1) / count and i < heavy[-(count - 1 - len(cuts))]:
            cuts.append(i + 1)
    bounds = [0, *cuts, len(layers)]
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
