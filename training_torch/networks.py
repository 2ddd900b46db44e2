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


def stages(model: nn.Sequential, count: int, costs: list[float] | None = None) -> list[nn.Sequential]:
    """``model`` cut into ``count`` consecutive stages whose largest total cost is the least
    possible (a cut never splits a layer; each stage holds a layer with parameters). ``costs`` is
    one figure per layer, measured (``layer_costs``: seconds of forward + backward); without it,
    parameter counts. ValueError where the model has fewer parameterised layers than ``count``.

    Why measured cost: a stage's time, not its parameters, sets GPipe's step (the slowest stage
    paces the pipeline). By parameters, ``small_cnn``'s cut put all three convolutions in stage 0
    and the dense layer alone (0.01% of the FLOPs) in stage 1: no overlap at all."""
    layers = list(model)
    heavy = [bool(sum(p.numel() for p in layer.parameters())) for layer in layers]
    if count < 1 or sum(heavy) < count:
        raise ValueError(stages_error(sum(heavy), count))
    weights = costs if costs is not None else [sum(p.numel() for p in layer.parameters()) for layer in layers]
    bounds = _min_max_cuts([float(w) for w in weights], heavy, count)
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _min_max_cuts(weights: list[float], heavy: list[bool], count: int) -> list[int]:
    """Bounds [0, ..., n] of ``count`` consecutive segments, each with a heavy layer, minimising
    the largest segment's sum (linear partition by dynamic programming; ties: the earliest cut)."""
    n = len(weights)
    prefix = [0.0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    heavies = [0]
    for h in heavy:
        heavies.append(heavies[-1] + h)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(count + 1)]  # best[k][j]: layers[:j] in k segments
    back = [[0] * (n + 1) for _ in range(count + 1)]
    best[0][0] = 0.0
    for k in range(1, count + 1):
        for j in range(1, n + 1):
            for i in range(k - 1, j):
                if best[k - 1][i] == inf or heavies[j] == heavies[i]:
                    continue
                # The last stage runs to the model's end: zero-cost layers after the last cut go with it.
                cost = max(best[k - 1][i], prefix[j] - prefix[i])
                if cost < best[k][j]:
                    best[k][j], back[k][j] = cost, i
    bounds, j = [n], n
    for k in range(count, 0, -1):
        j = back[k][j]
        bounds.append(j)
    return bounds[::-1]


def layer_costs(model: nn.Sequential, sample: torch.Tensor, repeats: int = 5) -> list[float]:
    """Seconds of each layer's forward + backward on ``sample`` (one micro-batch), the least of
    ``repeats``: what GPipe's stages are balanced by. Each layer's input requires a gradient only
    where an earlier layer has parameters, as in training (the first stage computes no gradient
    for the model's input: measured, its first layer's backward costs less than the others').
    Parameters' gradients and buffers (BatchNorm's statistics) are restored afterwards.

    On CPU the process's CPU seconds, not wall time: on cores shared with other work a preempted
    layer looks costlier than it is, and the cut moved (measured: a 16-layer model of equal
    layers cut 18 : 13 under a load average of 4 on 2 cores, where 16 : 15 is even)."""
    import time

    clock = time.perf_counter if sample.is_cuda else time.process_time
    layers = list(model)
    saved = {name: value.clone() for name, value in model.state_dict().items()}
    costs = [float("inf")] * len(layers)
    for _ in range(repeats):
        x, upstream = sample, False
        for index, layer in enumerate(layers):
            x = x.detach().requires_grad_(upstream and x.is_floating_point())
            started = clock()
            y = layer(x)
            if y.requires_grad:
                y.backward(torch.ones_like(y))
            if y.is_cuda:
                torch.cuda.synchronize()
            costs[index] = min(costs[index], clock() - started)
            upstream = upstream or any(p.requires_grad for p in layer.parameters())
            x = y
    model.zero_grad(set_to_none=True)
    model.load_state_dict(saved)
    return costs


def sample_input(model: nn.Sequential, rows: int, image_size: int | None = None) -> torch.Tensor | None:
    """A batch of ``rows`` inputs shaped as ``model`` takes them (this module's networks: raw
    pixels, raw rows, or a first Linear), on the model's device; None where the shape is unknown."""
    first = next(iter(model), None)
    device = next(model.parameters()).device
    if isinstance(first, Pixels) and image_size:
        return torch.randint(0, 256, (rows, image_size, image_size, 3), device=device).float()
    width = first.mean.numel() if isinstance(first, Standardize) else getattr(first, "in_features", None)
    return torch.randn(rows, width, device=device) if width else None
