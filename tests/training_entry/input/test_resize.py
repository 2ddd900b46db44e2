"""training_entry/input/images.resize: antialiased where it shrinks by more than
ANTIALIAS_ABOVE, plain bilinear otherwise (a copy stored at the training size x the crop margin)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from training_entry.input import images


def _noise(height: int, width: int) -> tf.Tensor:
    return tf.constant(np.random.default_rng(0).integers(0, 256, (height, width, 3)), tf.uint8)


def test_a_photo_shrunk_a_lot_is_averaged_not_sampled():
    photo = _noise(375, 500)
    got = images.resize(photo, 64).numpy()
    assert np.allclose(got, tf.image.resize(photo, [64, 64], antialias=True).numpy(), atol=1e-3)
    # Sampled pixels of uniform noise keep its spread (~74); averaged ones lose most of it.
    assert got.std() < 30 < tf.image.resize(photo, [64, 64]).numpy().std()


def test_a_stored_copy_shrunk_by_the_crop_margin_takes_the_plain_path():
    stored = _noise(72, 96)  # a 64 px training size x 1.125, aspect 4:3
    assert images.ANTIALIAS_ABOVE >= 72 / 64
    assert np.allclose(images.resize(stored, 64).numpy(), tf.image.resize(stored, [64, 64]).numpy(), atol=1e-3)
