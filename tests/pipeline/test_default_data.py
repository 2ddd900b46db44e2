"""The embedded default data: the digits CSV the local runner and ``upsert`` place at InputDataUri."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline import default_data
from pipeline.default_data import DIGITS_FILENAME, DIGITS_RECORDS, export_digits
from processing.rawdata import find_raw_file, load_raw

REPO = Path(__file__).resolve().parents[2]


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
    code = "import sys, pipeline.default_data; assert 'sklearn' not in sys.modules, 'imported'"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_recorded_md5_is_that_of_the_export():
    import hashlib

    from pipeline.default_data import DIGITS_CSV_MD5, digits_csv

    assert hashlib.md5(digits_csv()).hexdigest() == DIGITS_CSV_MD5
