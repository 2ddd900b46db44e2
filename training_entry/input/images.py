"""Images on the fly: decode, resize and augment in ``tf.data`` (per rank, any input mode),
and the same decode + resize inside the exported SavedModel for serving.

A record carries the encoded file as processing found it (``records.FEATURE_IMAGE``): PNG,
JPEG, GIF or BMP, any size, grey or colour. Every image becomes float32 RGB
``[size, size, 3]`` in 0..255; normalisation for the backbone happens inside the model
(``architectures``), so the float serving signature takes 0..255 too.

Training adds a random crop (from the resized image zero-padded to ``CROP_MARGIN`` x) and a random
horizontal flip (``augment``: the ``augmentation`` hyperparameter); validation, evaluation and serving only resize. Python 3.10 syntax.
"""

from __future__ import annotations

import math

import tensorflow as tf

from training_entry.input.records import FEATURE_IMAGE, FEATURE_Y

CROP_MARGIN = 1.125  # training crops size x size out of the resized image padded by 12.5%
CHANNELS = 3


def decode(encoded: tf.Tensor) -> tf.Tensor:
    """One encoded image -> uint8 [h, w, 3] (grey is repeated, alpha dropped)."""
    return tf.io.decode_image(encoded, channels=CHANNELS, expand_animations=False)


def resize(image: tf.Tensor, size: int) -> tf.Tensor:
    """-> float32 [size, size, 3] in 0..255 (bilinear: stays inside the input's range)."""
    resized = tf.image.resize(image, [size, size], method="bilinear")
    return tf.clip_by_value(resized, 0.0, 255.0)


def augment(image: tf.Tensor, size: int, augmentation: str = "crop_flip") -> tf.Tensor:
    """Training only (``contract.AUGMENTATIONS``): random crop, then a random horizontal flip
    unless ``crop``; ``none`` only resizes. float32 [size, size, 3]."""
    image = resize(image, size)
    if augmentation == "none":
        return image
    # Pad, then crop at a random offset: the content keeps the scale evaluation and serving
    # see (a crop out of a larger resize would show training bigger digits than the test).
    padded = int(math.ceil(size * CROP_MARGIN))
    image = tf.image.resize_with_crop_or_pad(image, padded, padded)
    image = tf.image.random_crop(image, [size, size, CHANNELS])
    if augmentation == "crop_flip":
        image = tf.image.random_flip_left_right(image)
    return image


def feature_spec() -> dict:
    return {
        FEATURE_IMAGE: tf.io.FixedLenFeature([], tf.string),
        FEATURE_Y: tf.io.FixedLenFeature([], tf.int64),
    }


def parse_example(serialized: tf.Tensor, size: int, training: bool,
                  augmentation: str = "crop_flip") -> tuple[tf.Tensor, tf.Tensor]:
    """One serialized Example -> (image float32 [size, size, 3], label int64). Per record:
    ``decode_image`` does not take a batch (images differ in size before the resize)."""
    parsed = tf.io.parse_single_example(serialized, feature_spec())
    image = decode(parsed[FEATURE_IMAGE])
    image = augment(image, size, augmentation) if training else resize(image, size)
    return image, parsed[FEATURE_Y]


def decode_batch(encoded: tf.Tensor, size: int) -> tf.Tensor:
    """Serving: tf.string [batch] of encoded images -> float32 [batch, size, size, 3]."""
    return tf.map_fn(
        lambda one: resize(decode(one), size),
        encoded,
        fn_output_signature=tf.TensorSpec([size, size, CHANNELS], tf.float32),
    )
