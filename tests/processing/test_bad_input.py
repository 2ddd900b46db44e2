"""Every refusal: one line naming the file and the fix, a non-zero exit, nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from processing.preprocess import main
from tests.processing.conftest import MlTree, labelled_data


def no_file(ml: MlTree) -> None:
    (ml.raw_dir / "README.txt").write_text("the data is elsewhere")


def two_files(ml: MlTree) -> None:
    x, y = labelled_data()
    ml.write_csv(x, y, "a.csv")
    ml.write_npz(x, y, "nested/b.npz")


def not_utf8_csv(ml: MlTree) -> None:
    (ml.raw_dir / "data.csv").write_bytes(b"f0,label\n\xff\xfe\x00\x81,1\n")


def not_an_npz(ml: MlTree) -> None:
    (ml.raw_dir / "data.npz").write_bytes(b"this is not a zip archive")


def npz_without_y(ml: MlTree) -> None:
    np.savez(ml.raw_dir / "data.npz", x=np.ones((10, 2)), labels=np.zeros(10))


def npz_with_mismatched_lengths(ml: MlTree) -> None:
    np.savez(ml.raw_dir / "data.npz", x=np.ones((10, 2)), y=np.zeros(9))


def npz_with_object_array(ml: MlTree) -> None:
    np.savez(ml.raw_dir / "data.npz", x=np.array([[1, "a"]], dtype=object), y=np.zeros(1))


def csv_without_label_column(ml: MlTree) -> None:
    x, y = labelled_data()
    ml.write_csv(x, y, header=["f0", "f1", "f2", "f3", "target"])


def csv_header_only(ml: MlTree) -> None:
    (ml.raw_dir / "data.csv").write_text("f0,f1,label\n")


def csv_ragged(ml: MlTree) -> None:
    (ml.raw_dir / "data.csv").write_text("f0,f1,label\n1,2,0\n\n3,4,1\n5,0\n")


def csv_every_row_short(ml: MlTree) -> None:
    (ml.raw_dir / "data.csv").write_text("f0,f1,label\n1,0\n\n3,1\n")


def npz_with_inf(ml: MlTree) -> None:
    x, y = labelled_data()
    x[3, 1] = np.inf
    ml.write_npz(x, y)


def beyond_float32(ml: MlTree) -> None:
    x, y = labelled_data()
    x[5, 0] = 1e39
    ml.write_csv(x, y)


def fractional_label(ml: MlTree) -> None:
    x, y = labelled_data()
    y = y.astype(float)
    y[4] = 1.5
    ml.write_npz(x, y)


def one_class(ml: MlTree) -> None:
    x, _ = labelled_data()
    ml.write_csv(x, np.zeros(len(x), dtype=int))


def class_too_small(ml: MlTree) -> None:
    x, y = labelled_data(per_class=(40, 2, 25))
    ml.write_csv(x, y)


def too_few_records_for_shards(ml: MlTree) -> None:
    x, y = labelled_data(per_class=(10, 10, 10))  # validation and test get 4-5 records each
    ml.write_csv(x, y)


CASES = [
    # (writes the raw data, extra arguments, expected part of the message)
    (no_file, [], r"no raw data: .*/processing/input/data has no \.csv or \.npz file \(it holds only README\.txt\); point InputDataUri at"),
    (two_files, [], r"2 table files under InputDataUri \(a\.csv, nested/b\.npz\); point it at a prefix holding one, or name them for their splits"),
    (not_utf8_csv, [], r"cannot read .*/data\.csv as a UTF-8 CSV file .*; export it as comma-separated text"),
    (not_an_npz, [], r"cannot read .*/data\.npz as an \.npz archive \(not a zip archive\); write it with np\.savez"),
    (npz_without_y, [], r"data\.npz has no array 'y' \(it holds \['labels', 'x'\]\); save it with np\.savez\(path, x=features, y=labels\)"),
    (npz_with_mismatched_lengths, [], r"data\.npz: x has shape \(10, 2\) and y \(9,\); expected x \(records, features\)"),
    (npz_with_object_array, [], r"cannot read .*/data\.npz as an \.npz archive"),
    (csv_without_label_column, [], r"data\.csv has no 'label' column \(header: f0,f1,f2,f3,target\); set -p LabelColumn=<one of those names>"),
    (csv_without_label_column, ["--label-column", "Species"], r"data\.csv has no 'Species' column \(header: f0,f1,f2,f3,target\); set -p LabelColumn="),
    (csv_header_only, [], r"data\.csv has a header but no records"),
    (csv_ragged, [], r"data\.csv line 5 has 2 fields but the header has 3; every row needs one value per column"),
    (csv_every_row_short, [], r"data\.csv line 2 has 2 fields but the header has 3"),
    (npz_with_inf, [], r"data\.npz: record 4, feature 2 is inf"),
    (beyond_float32, [], r"data\.csv: record 6, feature 1 = 1e\+39 does not fit in float32"),
    (fractional_label, [], r"data\.npz: record 5 has label 1\.5, not an integer; labels must be class numbers 0\.\.K-1"),
    (one_class, [], r"data\.csv: every row has label = '0'; a classifier needs at least 2 classes: check LabelColumn"),
    (class_too_small, [], r"data\.csv: class 1 has 2 record\(s\), too few to stratify into train/validation/test"),
    (too_few_records_for_shards, ["--instance-count", "2", "--processes-per-host", "3"], r"data\.csv: the (validation|test) split gets 5 records but 6 shards are needed \(--instance-count 2 x --processes-per-host 3\)"),
    (labelled_data, ["--validation-fraction", "0.6", "--test-fraction", "0.4"], r"--validation-fraction 0\.6 \+ --test-fraction 0\.4 leaves nothing to train on"),
    (labelled_data, ["--instance-count", "0"], r"bad arguments: --instance-count 0 must be at least 1"),
    (labelled_data, ["--seed", "-1"], r"bad arguments: --seed -1 must be at least 0"),
    (labelled_data, ["--seed", "abc"], r"bad arguments: argument --seed: invalid int value: 'abc'"),
]


@pytest.mark.parametrize("write, args, message", CASES, ids=[c[0].__name__ + str(i) for i, c in enumerate(CASES)])
def test_bad_input_is_refused_with_one_line_and_nothing_written(ml, capsys, write, args, message):
    if write is labelled_data:
        ml.write_csv(*labelled_data())
    else:
        write(ml)
    assert main(args) == 1
    text = ml.message.read_text()
    assert "\n" not in text and len(text.encode()) <= 1024
    assert __import__("re").search(message, text), text
    assert capsys.readouterr().err.strip() == f"preprocess: {text}"
    assert ml.leftovers() == []


def test_nothing_is_written_when_a_late_step_fails(ml, monkeypatch):
    """A failure while writing shards (here: the disk) removes the staged files too."""
    ml.write_csv(*labelled_data())

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("processing.preprocess._write_tfrecord", disk_full)
    assert main([]) == 1
    assert "unexpected error in preprocess: OSError: [Errno 28] No space left on device" in ml.message.read_text()
    assert ml.leftovers() == []


def test_output_dirs_that_are_not_empty_are_refused(ml):
    ml.write_csv(*labelled_data())
    (ml.outputs["train"] / "train-00000-of-00002.tfrecord").write_bytes(b"old run")
    assert main([]) == 1
    assert "processing/output/train is not empty (1 entries); processing writes into empty output directories" in ml.message.read_text()
    assert [p.name for p in ml.outputs["train"].iterdir()] == ["train-00000-of-00002.tfrecord"]


def test_a_malformed_resourceconfig_is_refused(ml):
    ml.write_csv(*labelled_data())
    config = ml.base / "config" / "resourceconfig.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]}))
    assert main([]) == 1
    assert "resourceconfig.json is unreadable or lacks current_host/hosts" in ml.message.read_text()
    assert ml.leftovers() == []


def test_a_long_multiline_message_becomes_one_line_of_at_most_one_kilobyte(ml, monkeypatch):
    ml.write_csv(*labelled_data())

    def fails(*args, **kwargs):
        raise RuntimeError("first line\n" + "é" * 2000)

    monkeypatch.setattr("processing.preprocess._write_tfrecord", fails)
    assert main([]) == 1
    written = ml.message.read_bytes()
    assert 1020 < len(written) <= 1024
    assert written.decode().startswith("unexpected error in preprocess: RuntimeError: first line éé")
