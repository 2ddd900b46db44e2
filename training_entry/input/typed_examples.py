"""Records of a table of typed columns, shared by processing, training, evaluation and serving.

The manifest's ``columns`` (``records.Manifest.columns``, written by ``processing.columns``)
lists every feature column of the CSV in header order, label left out: its ``name``, ``key``
(record key and model input name), ``type`` (numeric, categorical, hashed) and the train
split's statistics or vocabulary; ``dropped`` columns are in no record and no model input.
A record holds each kept column's raw value under its key: a numeric one as float (NaN when
missing), a categorical one as the cell's text, exactly as the CSV has it ("NA" included: the
model decides what is missing, so serving does the same). The label is ``records.FEATURE_Y``.
Python 3.10 syntax.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import tensorflow as tf

from training_entry.input.records import FEATURE_Y

NUMERIC = "numeric"
CATEGORICAL = "categorical"
HASHED = "hashed"
# What a cell holds when it is missing (case-insensitive, after stripping spaces).
MISSING = ("", "na", "n/a", "nan", "null", "?")


def kept(schema: Sequence[dict]) -> list[dict]:
    return [c for c in schema if not c.get("dropped")]


class Encoder:
    """cells (one row, header order, label removed) + class id -> a serialized Example."""

    def __init__(self, schema: Sequence[dict]):
        self._plan = [(i, c["key"], c["type"] == NUMERIC) for i, c in enumerate(schema) if not c.get("dropped")]

    def __call__(self, cells: Sequence[str], label: int) -> bytes:
        feature = {}
        for index, key, numeric in self._plan:
            cell = cells[index]
            if numeric:
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[_number(cell)]))
            else:
                feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[cell.strip().encode("utf-8")]))
        feature[FEATURE_Y] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _number(cell: str) -> float:
    text = cell.strip()
    if text.lower() in MISSING:
        return math.nan
    value = float(text)
    return value if math.isfinite(value) else math.nan


def input_specs(schema: Sequence[dict]) -> dict[str, tf.TensorSpec]:
    """The model's inputs: one [batch] tensor per kept column (float32 or string)."""
    return {c["key"]: tf.TensorSpec([None], tf.float32 if c["type"] == NUMERIC else tf.string, name=c["key"])
            for c in kept(schema)}


def feature_spec(schema: Sequence[dict]) -> dict:
    spec = {key: tf.io.FixedLenFeature([], s.dtype) for key, s in input_specs(schema).items()}
    spec[FEATURE_Y] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse_batch(serialized: tf.Tensor, schema: Sequence[dict]) -> tuple[dict, tf.Tensor]:
    """A batch of serialized records -> ({key: [batch]}, y [batch] int64)."""
    parsed = tf.io.parse_example(serialized, feature_spec(schema))
    y = parsed.pop(FEATURE_Y)
    return parsed, y


def parse_csv_lines(lines: tf.Tensor, schema: Sequence[dict]) -> dict[str, tf.Tensor]:
    """CSV lines (one row each, every feature column in header order, label left out) -> the
    model's inputs, as ``Encoder`` + ``parse_batch`` would give them."""
    cells = tf.io.decode_csv(lines, record_defaults=[[""] for _ in schema], na_value="\x00unused")
    out = {}
    for column, cell in zip(schema, cells, strict=True):
        if column.get("dropped"):
            continue
        if column["type"] == NUMERIC:
            text = tf.strings.strip(cell)
            gap = is_missing(text)
            value = tf.strings.to_number(tf.where(gap, "nan", text), tf.float32)
            out[column["key"]] = tf.where(tf.math.is_finite(value), value, float("nan"))
        else:
            out[column["key"]] = tf.strings.strip(cell)
    return out


def is_missing(text: tf.Tensor) -> tf.Tensor:
    lowered = tf.strings.lower(tf.strings.strip(text))
    return tf.reduce_any(tf.equal(lowered[..., None], tf.constant(MISSING)), axis=-1)


def parse_block(block: tf.Tensor, schema: Sequence[dict]) -> tuple[dict, tf.Tensor]:
    """``[batches, batch]`` serialized records -> ({key: [batches, batch]}, y [batches, batch]):
    one parse per block of batches, as ``datasets`` parses float-vector tables."""
    x, y = parse_batch(tf.reshape(block, [-1]), schema)
    shape = tf.shape(block)
    return {key: tf.reshape(value, shape) for key, value in x.items()}, tf.reshape(y, shape)
