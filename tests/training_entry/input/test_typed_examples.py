"""Typed-column records: what processing writes, training parses and serving reads from CSV lines."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from training_entry.input import typed_examples as T

SCHEMA = (
    {"name": "island", "key": "island", "type": "categorical", "vocabulary": ["", "Biscoe", "Dream"]},
    {"name": "id", "key": "id", "type": "categorical", "vocabulary": [], "dropped": True},
    {"name": "bill (mm)", "key": "bill_mm", "type": "numeric", "mean": 40.0, "std": 2.0},
)


def test_records_hold_raw_values_and_csv_lines_parse_the_same():
    rows = [["Dream", "r1", "41.5"], [" NA ", "r2", "NA"], ["Mars", "r3", "inf"], ["", "r4", " 7 "]]
    serialized = tf.constant([T.Encoder(SCHEMA)(row, label) for label, row in enumerate(rows)])
    from_records, y = T.parse_batch(serialized, SCHEMA)
    assert y.numpy().tolist() == [0, 1, 2, 3] and sorted(from_records) == ["bill_mm", "island"]
    from_csv = T.parse_csv_lines(tf.constant([",".join(r) for r in rows]), SCHEMA)
    for key in ("island", "bill_mm"):
        a, b = from_records[key].numpy(), from_csv[key].numpy()
        if a.dtype == object:
            assert [v.strip() for v in a.tolist()] == b.tolist()
        else:
            assert np.array_equal(a, b, equal_nan=True)
    assert np.isnan(from_records["bill_mm"].numpy()[1:3]).all()  # NA and inf: missing
    assert from_records["bill_mm"].numpy()[3] == 7.0


def test_missing_is_any_case_of_the_usual_tokens():
    cells = tf.constant(["", "NA", "n/a", "NaN", "NULL", "?", " na ", "0", "none"])
    assert T.is_missing(cells).numpy().tolist() == [True] * 7 + [False, False]


def test_parse_block_keeps_batches():
    serialized = [T.Encoder(SCHEMA)(["Dream", "x", "1"], 1)] * 6
    x, y = T.parse_block(tf.reshape(tf.constant(serialized), [2, 3]), SCHEMA)
    assert x["island"].shape == (2, 3) and y.shape == (2, 3)
