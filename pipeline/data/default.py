"""The embedded default data: scikit-learn's bundled 8x8 digits, as the raw CSV processing reads
and as an image tree (``<digit>/<index>.png``, upscaled grayscale PNGs).

The local runner and ``upsert`` place the CSV at the pipeline's default InputDataUri, so a
first run needs no data of its own and no download; the image tree goes to
``parameters.default_image_data_uri`` when a run points InputDataUri there. The bytes are the same on every call (and
so is the file's S3 ETag), which keeps PreprocessData's step cache warm across uploads.

scikit-learn is imported only when the data is exported: building a definition (which needs
``DIGITS_RECORDS``) must work on a machine without it. Never TensorFlow here.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from pipeline.data.png import encode_png
from processing.contract import LABEL_COLUMN

DIGITS_RECORDS = 1797  # records in sklearn.datasets.load_digits(); checked by the tests
DIGITS_FEATURES = 64
DIGITS_CLASSES = 10
DIGITS_FILENAME = "digits.csv"
# MD5 of digits_csv(): a store already holding these bytes needs no regeneration, which
# imports scikit-learn (~1 s of every local run). tests/pipeline/data/test_default_data.py checks it.
DIGITS_CSV_MD5 = "e4c49cf2576a68f530076ae2314bc6ec"
# The image tree: each 8x8 digit upscaled DIGITS_IMAGE_SCALE times (nearest neighbour) to
# DIGITS_IMAGE_SIZE square, intensities 0..16 stretched to 0..255.
DIGITS_IMAGE_SCALE = 4
DIGITS_IMAGE_SIZE = 8 * DIGITS_IMAGE_SCALE
_DIGITS_MAX = 16


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


# --- The digits as an image tree -------------------------------------------------------------
def digits_image_key(index: int, label: int) -> str:
    """Where record ``index`` (of label ``label``) sits in the tree: ``<label>/<index>.png``."""
    return f"{label}/{index:04d}.png"


def digit_pixels(features) -> list[bytes]:
    """One 8x8 digit (64 values 0..16) -> DIGITS_IMAGE_SIZE rows of 0..255 grayscale."""
    values = [int(v) for v in features]
    rows = []
    for r in range(8):
        row = bytes(
            round(values[r * 8 + c] * 255 / _DIGITS_MAX) for c in range(8) for _ in range(DIGITS_IMAGE_SCALE)
        )
        rows.extend([row] * DIGITS_IMAGE_SCALE)
    return rows


def digits_images() -> dict[str, bytes]:
    """Relative key -> PNG bytes for every digit: class folders ``0`` .. ``9`` (sorted names =
    the digit, so image labels equal the CSV's labels). Same bytes on every call."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    return {
        digits_image_key(i, int(label)): encode_png(digit_pixels(features), DIGITS_IMAGE_SIZE)
        for i, (features, label) in enumerate(zip(digits.data, digits.target, strict=True))
    }


def export_digits_images(directory: str | os.PathLike) -> Path:
    """Write the digits image tree under ``directory``; returns it. Each file is written
    atomically; files already there with other names are left alone."""
    root = Path(directory)
    for key, data in digits_images().items():
        target = root / key
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, target)
    return root
