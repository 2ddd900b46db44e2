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
ANTIALIAS_ABOVE = 1.5  # shrink factors above this are antialiased (``resize``)
CHANNELS = 3
# Serving decodes what a client sends: a 493 KB PNG can declare 13000 x 13000 pixels (500 MiB
# decoded, four times that as float32 for the resize). The header's size is checked in the
# graph before decoding (``refuse_oversized``), so a SageMaker endpoint running the exported
# SavedModel refuses it too. 5000 x 5000: a 24-megapixel camera image fits, and decoding plus
# resizing one takes at most ~375 MB.
MAX_SERVING_PIXELS = 25_000_000
TOO_LARGE = "over the serving limit"  # in the refusal's words; serving/model.py finds it there
_PNG_MAGIC = (0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A)
_GIF_IMAGE_SEPARATOR = 0x2C  # ',' before each frame: the count bounds the frames from above


def decode(encoded: tf.Tensor) -> tf.Tensor:
    """One encoded image -> uint8 [h, w, 3] (grey is repeated, alpha dropped)."""
    return tf.io.decode_image(encoded, channels=CHANNELS, expand_animations=False)


def resize(image: tf.Tensor, size: int) -> tf.Tensor:
    """-> float32 [size, size, 3] in 0..255 (bilinear: stays inside the input's range).

    Antialiased where it shrinks by more than ``ANTIALIAS_ABOVE``: shrinking a 500 px photo to
    64 px without it samples single pixels (sensor noise and all), so a photo and its copy
    stored at the training size (processing's ``--image-records resized``) landed 14.5/255
    apart on average; with it, 3.9. A copy stored at the training size x the crop margin
    shrinks by 1.125 only, where plain bilinear aliases little and costs far less per image
    (benchmarks/input/resized_records.py). Enlarging is unchanged."""
    shape = tf.shape(image)
    shrink = tf.cast(tf.minimum(shape[0], shape[1]), tf.float32) / float(size)
    resized = tf.cond(
        shrink > ANTIALIAS_ABOVE,
        lambda: tf.image.resize(image, [size, size], method="bilinear", antialias=True),
        lambda: tf.image.resize(image, [size, size], method="bilinear"),
    )
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
        lambda one: resize(decode(refuse_oversized(one)), size),
        encoded,
        fn_output_signature=tf.TensorSpec([size, size, CHANNELS], tf.float32),
    )


def declared_size(encoded: tf.Tensor) -> tf.Tensor:
    """int64 [width, height, frames] as the header of a PNG, JPEG, GIF or BMP says, without
    decoding it; [0, 0, 1] for anything else (``decode`` refuses it after). A GIF's frames
    are counted from above (``decode_image`` decodes them all, then keeps the first)."""
    head = tf.strings.substr(tf.strings.join([tf.strings.substr(encoded, 0, 32), b"\0" * 32]), 0, 32)
    byte = tf.cast(tf.io.decode_raw(head, tf.uint8), tf.int64)

    def number(first: int, count: int, big_endian: bool) -> tf.Tensor:
        order = range(first, first + count) if big_endian else range(first + count - 1, first - 1, -1)
        value = tf.constant(0, tf.int64)
        for index in order:
            value = value * 256 + byte[index]
        return value

    def starts_with(magic) -> tf.Tensor:
        return tf.reduce_all(tf.equal(byte[: len(magic)], tf.constant(magic, tf.int64)))

    def bmp_height() -> tf.Tensor:
        height = number(22, 4, False)
        return tf.abs(tf.where(height >= 2**31, height - 2**32, height))  # negative: top-down rows

    def gif() -> tf.Tensor:
        separators = tf.equal(tf.io.decode_raw(encoded, tf.uint8), _GIF_IMAGE_SEPARATOR)
        frames = tf.maximum(tf.reduce_sum(tf.cast(separators, tf.int64)), 1)
        return tf.stack([number(6, 2, False), number(8, 2, False), frames])

    def jpeg() -> tf.Tensor:
        shape = tf.cast(tf.io.extract_jpeg_shape(encoded), tf.int64)
        return tf.stack([shape[1], shape[0], tf.constant(1, tf.int64)])

    one = tf.constant(1, tf.int64)

    def png() -> tf.Tensor:
        # The size is the IHDR chunk's (13 bytes, first after the signature; 1 to 2^31 - 1
        # pixels a side): behind the signature, garbage is no size to refuse (413) but bytes
        # that are no image (decode refuses them: 400).
        width, height = number(16, 4, True), number(20, 4, True)
        ihdr = tf.reduce_all(tf.equal(byte[12:16], tf.constant(tuple(b"IHDR"), tf.int64)))
        valid = (tf.equal(number(8, 4, True), 13) & ihdr & (width >= 1) & (width < 2**31)
                 & (height >= 1) & (height < 2**31))
        return tf.where(valid, tf.stack([width, height, one]), tf.constant([0, 0, 1], tf.int64))

    return tf.case([
        (starts_with(_PNG_MAGIC), png),
        (tf.io.is_jpeg(encoded), jpeg),
        (starts_with((0x47, 0x49, 0x46, 0x38)), gif),  # GIF8
        (starts_with((0x42, 0x4D)), lambda: tf.stack([number(18, 4, False), bmp_height(), one])),  # BM
    ], default=lambda: tf.constant([0, 0, 1], tf.int64), exclusive=True)


def refuse_oversized(encoded: tf.Tensor, max_pixels: int = MAX_SERVING_PIXELS) -> tf.Tensor:
    """``encoded``, once its header says it decodes to at most ``max_pixels`` pixels (all of a
    GIF's frames); else InvalidArgumentError, before a byte is decoded."""
    size = declared_size(encoded)
    pixels = size[0] * size[1] * size[2]
    message = tf.strings.join([
        "the image is ", tf.strings.as_string(size[0]), " x ", tf.strings.as_string(size[1]), " pixels",
        tf.where(size[2] > 1, " per frame", ""),
        f", {TOO_LARGE} of {max_pixels} (MAX_SERVING_PIXELS); resize it before sending"])
    check = tf.debugging.Assert(pixels <= max_pixels, [message])
    with tf.control_dependencies([check]):
        return tf.identity(encoded)
