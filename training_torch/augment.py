"""Training-batch augmentation for image records, the TensorFlow room's (``training_entry/input/
images.py``: ``augment``) on the PyTorch room's batches, under the same hyperparameter
(``contract.HP_AUGMENTATION``, values ``contract.AUGMENTATIONS``):

- ``crop_flip``: each image zero-padded to ``ceil(size x CROP_MARGIN)`` per side, centred,
  then a random ``size x size`` crop out of it, then a random horizontal flip (half the images);
- ``crop``: the crop alone (digits and text are not mirror-symmetric);
- ``none``: the batch as it is.

Padding, not cropping out of a larger resize: the content keeps the scale evaluation and
serving see. Training batches only: validation, evaluation and serving see the images as
``data.py`` resized them. Table records are never augmented (``applies``).

Standard library and torch only: the room must not import TensorFlow, so the crop margin is
restated here (the unit test checks it against the TF room's source text)."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from training_entry import contract
from training_entry.input import records

CROP_MARGIN = 1.125  # = training_entry.input.images.CROP_MARGIN (tests/training_torch/test_augment.py)


def applies(kind: str, augmentation: str) -> bool:
    """Whether training batches of records of ``kind`` are augmented: images, unless ``none``."""
    if augmentation not in contract.AUGMENTATIONS:
        raise ValueError(f"{contract.HP_AUGMENTATION}={augmentation} is not one of "
                         f"{', '.join(contract.AUGMENTATIONS)}; pass one of them")
    return kind == records.KIND_IMAGE and augmentation != "none"


def batch(x: torch.Tensor, augmentation: str, generator: torch.Generator) -> torch.Tensor:
    """``x``: ``[n, size, size, 3]`` pixels (HWC, as ``data.Split`` holds images) -> the same
    shape and dtype, each image cropped (and flipped) at its own random draw from ``generator``."""
    if augmentation == "none" or len(x) == 0:
        return x
    n, height, width = x.shape[0], x.shape[1], x.shape[2]
    padded_h, padded_w = math.ceil(height * CROP_MARGIN), math.ceil(width * CROP_MARGIN)
    top, left = (padded_h - height) // 2, (padded_w - width) // 2  # centred, as resize_with_crop_or_pad
    # F.pad pads the last dimensions first: channels (none), width, height.
    padded = F.pad(x, (0, 0, left, padded_w - width - left, top, padded_h - height - top))
    ys = torch.randint(0, padded_h - height + 1, (n,), generator=generator)
    xs = torch.randint(0, padded_w - width + 1, (n,), generator=generator)
    flips = torch.rand(n, generator=generator) < 0.5 if augmentation == "crop_flip" else torch.zeros(n, dtype=torch.bool)
    # One gather for the whole batch (no per-image Python loop): image i's rows ys[i]..+height and
    # columns xs[i]..+width, the columns reversed where it is flipped.
    rows = ys[:, None] + torch.arange(height)
    cols = xs[:, None] + torch.arange(width)
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    return padded[torch.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
