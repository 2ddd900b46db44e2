"""Scoring a model of typed columns (a CSV with categorical columns or gaps) through the
SavedModel's ``serving_default`` signature: one tensor per column, the raw values as the
shards hold them, so evaluation calls the model exactly as a client does, encoding included.

The test records are parsed with the signature's own input specs (key and dtype per column).
Python 3.10 syntax.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from training_entry.contract import SERVING_OUTPUT, SIGNATURE_DEFAULT
from training_entry.input import records


class TableModelError(Exception):
    """The SavedModel cannot score typed-column records; the message says why and what to do."""


def is_typed(payload: bytes) -> bool:
    """Whether a table record holds typed columns (no float vector ``records.FEATURE_X``)."""
    feature = tf.train.Example.FromString(payload).features.feature
    return records.FEATURE_X not in feature and records.FEATURE_Y in feature


def load_columns_signature(version_dir: str, archive: str):
    """(score(serialized batch) -> (probabilities, labels), the signature's input keys)."""
    version = os.path.basename(version_dir)
    try:
        loaded = tf.saved_model.load(version_dir)
    except Exception as e:  # TF raises many types for an unloadable SavedModel
        raise TableModelError(f"{archive}: cannot load version {version} as a SavedModel ({type(e).__name__})") from None
    function = loaded.signatures.get(SIGNATURE_DEFAULT)
    inputs = function.structured_input_signature[1] if function is not None else {}
    if function is None or SERVING_OUTPUT not in function.structured_outputs or not inputs:
        raise TableModelError(
            f"{archive}: version {version} has no '{SIGNATURE_DEFAULT}' signature taking one tensor per "
            f"column and returning '{SERVING_OUTPUT}'; the test records hold typed columns, so train "
            f"the model on this data with the built-in mlp"
        )
    spec = {key: tf.io.FixedLenFeature([], s.dtype) for key, s in inputs.items()}
    spec[records.FEATURE_Y] = tf.io.FixedLenFeature([], tf.int64)

    def score(batch: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        parsed = tf.io.parse_example(tf.constant(batch), spec)
        labels = parsed.pop(records.FEATURE_Y).numpy()
        return np.asarray(function(**parsed)[SERVING_OUTPUT]), labels

    score.saved_model = loaded  # the signature needs the loaded object's variables alive
    return score, sorted(inputs)
