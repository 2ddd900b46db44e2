"""The embedded default data: the digits CSV the local runner and ``upsert`` place at InputDataUri."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.data import default as default_data
from pipeline.data.default import DIGITS_FILENAME, DIGITS_RECORDS, export_digits
from processing.rawdata import find_raw_file, load_raw

REPO = Path(__file__).resolve().parents[3]


def test_export_is_byte_identical_on_every_call(tmp_path):
    first = export_digits(tmp_path / "a.csv").read_bytes()
    second = export_digits(tmp_path / "b.csv").read_bytes()
    assert first == second
    lines = first.decode("ascii").splitlines()
    assert lines[0] == ",".join([f"f{i}" for i in range(64)] + ["label"])
    assert len(lines) == 1 + DIGITS_RECORDS
    assert not list(tmp_path.glob("*.partial"))


def test_a_directory_gets_digits_csv_inside(tmp_path):
    assert export_digits(tmp_path) == tmp_path / DIGITS_FILENAME
    assert (tmp_path / DIGITS_FILENAME).is_file()


def test_processing_reads_the_export_as_declared(tmp_path):
    export_digits(tmp_path / "nested" / "digits.csv")
    data = load_raw(find_raw_file(str(tmp_path)))
    assert (len(data.y), data.num_features, data.num_classes) == (
        DIGITS_RECORDS,
        default_data.DIGITS_FEATURES,
        default_data.DIGITS_CLASSES,
    )


def test_importing_it_needs_no_scikit_learn():
    """Building a definition imports DIGITS_RECORDS; scikit-learn is only in the [local] extra."""
    code = "import sys, pipeline.data.default; assert 'sklearn' not in sys.modules, 'imported'"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_recorded_md5_is_that_of_the_export():
    import hashlib

    from pipeline.data.default import DIGITS_CSV_MD5, digits_csv

    assert hashlib.md5(digits_csv()).hexdigest() == DIGITS_CSV_MD5


# --- The digits as an image tree -------------------------------------------------------------
def test_the_image_tree_decodes_to_the_digits_pixels_upscaled(tmp_path):
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    from pipeline.data.default import DIGITS_IMAGE_SCALE, DIGITS_IMAGE_SIZE, export_digits_images
    from processing.contract import data_kind

    root = export_digits_images(tmp_path / "tree")
    keys = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert len(keys) == DIGITS_RECORDS and data_kind(keys) == "image"
    assert sorted({k.split("/")[0] for k in keys}) == [str(d) for d in range(default_data.DIGITS_CLASSES)]
    digits = load_digits()
    for index in (0, 1, 500, DIGITS_RECORDS - 1):
        label = int(digits.target[index])
        image = tf.io.decode_png((root / f"{label}/{index:04d}.png").read_bytes()).numpy()
        assert image.shape == (DIGITS_IMAGE_SIZE, DIGITS_IMAGE_SIZE, 1)
        expected = np.round(digits.images[index] * 255 / 16).astype(np.uint8)
        upscaled = np.kron(expected, np.ones((DIGITS_IMAGE_SCALE, DIGITS_IMAGE_SCALE), np.uint8))
        np.testing.assert_array_equal(image[:, :, 0], upscaled)


def test_the_image_tree_is_byte_identical_on_every_call():
    from pipeline.data.default import digits_images

    assert digits_images() == digits_images()


def test_png_encoder_writes_what_a_decoder_reads_back_in_grey_and_rgb():
    import numpy as np
    import tensorflow as tf

    from pipeline.data.png import encode_png

    rng = np.random.default_rng(0)
    for channels in (1, 3):
        pixels = rng.integers(0, 256, size=(5, 7, channels), dtype=np.uint8)
        data = encode_png([row.tobytes() for row in pixels], 7, channels)
        np.testing.assert_array_equal(tf.io.decode_png(data, channels=channels).numpy(), pixels)


def test_a_local_run_on_the_image_uri_finds_the_tree_in_its_store(tmp_path):
    from pipeline.cli.local.commands import place_code_and_data
    from pipeline.definition import parameters as P
    from pipeline.local.store.storage import LocalStorage
    from pipeline.settings import Settings

    settings = Settings()
    storage = LocalStorage(tmp_path / "store")
    uri = P.default_image_data_uri(settings.bucket, settings.prefix)
    said = []
    place_code_and_data(storage, settings, {P.INPUT_DATA_URI: uri}, said.append)
    listed = storage.list(uri)
    assert len(listed) == DIGITS_RECORDS
    assert listed[0] == uri + "0/0000.png"
    place_code_and_data(storage, settings, {P.INPUT_DATA_URI: uri}, said.append)
    assert said[-1].endswith(": 0 object(s) uploaded, the rest unchanged")
