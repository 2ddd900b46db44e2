"""``tf.train.Example`` encoding of one record, shared by processing, training and evaluation.

Each record holds the features as a float list (``records.FEATURE_X``) and the integer class
label (``records.FEATURE_Y``). Python 3.10 syntax (runs in SageMaker's py310 containers).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from training_entry.records import FEATURE_X, FEATURE_Y


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
