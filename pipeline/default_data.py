"""The embedded default data: scikit-learn's bundled 8x8 digits, as the raw CSV processing reads.

The local runner and ``upsert`` place this file at the pipeline's default InputDataUri, so a
first run needs no data of its own and no download. The bytes are the same on every call (and
so is the file's S3 ETag), which keeps PreprocessData's step cache warm across uploads.

scikit-learn is imported only when the data is exported: building a definition (which needs
``DIGITS_RECORDS``) must work on a machine without it. Never TensorFlow here.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from processing.contract import LABEL_COLUMN

DIGITS_RECORDS = 1797  # records in sklearn.datasets.load_digits(); checked by the tests
DIGITS_FEATURES = 64
DIGITS_CLASSES = 10
DIGITS_FILENAME = "digits.csv"
# MD5 of digits_csv(): a store already holding these bytes needs no regeneration, which
# imports scikit-learn (~1 s of every local run). tests/pipeline/test_default_data.py checks it.
DIGITS_CSV_MD5 = "e4c49cf2576a68f530076ae2314bc6ec"


def digits_csv() -> bytes:
    """The digits as CSV bytes: header ``f0..f63,label``, one record per line, ``\\n`` endings."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    out = io.StringIO()
    out.write(",".join([f"f{i}" for i in range(digits.data.shape[1])] + [LABEL_COLUMN]) + "\n")
    for features, label in zip(digits.data, digits.target, strict=True):
        # Pixel intensities are whole numbers 0..16; writing them as integers keeps the
        # file small and its bytes independent of float formatting.
        out.write(",".join([str(int(v)) for v in features] + [str(int(label))]) + "\n")
    return out.getvalue().encode("ascii")


def export_digits(path: str | os.PathLike) -> Path:
    """Write the digits CSV to ``path`` (a directory gets ``digits.csv`` inside) atomically;
    returns the file written."""
    target = Path(path)
    if target.is_dir():
        target = target / DIGITS_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(digits_csv())
    os.replace(partial, target)
    return target
