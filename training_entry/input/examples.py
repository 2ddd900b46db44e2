"""``tf.train.Example`` encoding of one record, shared by processing, training and evaluation.

A table's record holds the features as a float list (``records.FEATURE_X``) and the integer
class label (``records.FEATURE_Y``); an image's record holds the encoded file as it is plus its
label, class name and size (see ``records``). Python 3.10 syntax (runs in SageMaker's py310
containers).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from training_entry.input.records import (
    FEATURE_CLASS_NAME,
    FEATURE_HEIGHT,
    FEATURE_IMAGE,
    FEATURE_WIDTH,
    FEATURE_X,
    FEATURE_Y,
)


def serialize(x, y: int) -> bytes:
    """One record: ``x`` a 1-D sequence of floats, ``y`` its integer label."""
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                FEATURE_X: tf.train.Feature(
                    float_list=tf.train.FloatList(value=np.asarray(x, dtype=np.float32).ravel())
                ),
                FEATURE_Y: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y)])),
            }
        )
    ).SerializeToString()


def feature_spec(num_features: int) -> dict:
    return {
        FEATURE_X: tf.io.FixedLenFeature([num_features], tf.float32),
        FEATURE_Y: tf.io.FixedLenFeature([], tf.int64),
    }


def parse_batch(serialized: tf.Tensor, num_features: int) -> tuple[tf.Tensor, tf.Tensor]:
    """A batch of serialized Examples -> (x [batch, num_features] float32, y [batch] int64).

    Parse after batching: one vectorised op per batch instead of one per record.
    """
    parsed = tf.io.parse_example(serialized, feature_spec(num_features))
    return parsed[FEATURE_X], parsed[FEATURE_Y]


# --- Images ----------------------------------------------------------------------------------
def serialize_image(encoded: bytes, label: int, class_name: str, height: int, width: int) -> bytes:
    """One image record: ``encoded`` is the JPEG/PNG file's bytes, stored as they are (no
    decode and re-encode: no quality loss, and a 200 KB JPEG stays 200 KB in the shard)."""
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                FEATURE_IMAGE: _bytes(encoded),
                FEATURE_Y: _int64(label),
                FEATURE_CLASS_NAME: _bytes(class_name.encode("utf-8")),
                FEATURE_HEIGHT: _int64(height),
                FEATURE_WIDTH: _int64(width),
            }
        )
    ).SerializeToString()


def image_feature_spec() -> dict:
    """``tf.io.parse_example`` spec of an image record: decode ``FEATURE_IMAGE`` with
    ``tf.io.decode_image(..., expand_animations=False)`` (JPEG or PNG, any size)."""
    return {
        FEATURE_IMAGE: tf.io.FixedLenFeature([], tf.string),
        FEATURE_Y: tf.io.FixedLenFeature([], tf.int64),
        FEATURE_CLASS_NAME: tf.io.FixedLenFeature([], tf.string),
        FEATURE_HEIGHT: tf.io.FixedLenFeature([], tf.int64),
        FEATURE_WIDTH: tf.io.FixedLenFeature([], tf.int64),
    }


def _bytes(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
