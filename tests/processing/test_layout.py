"""Data published with its splits (processing.layout, split.given_split): images and tables."""

from __future__ import annotations

import numpy as np
import pytest

from processing.preprocess import main
from processing.split import given_split
from tests.processing.conftest import labelled_data, read_image_split, write_image_tree


def image_splits(ml, splits: dict[str, dict[str, int]]) -> None:
    for folder, per_class in splits.items():
        write_image_tree(ml.raw_dir / folder, per_class)


def test_image_split_folders_are_used_as_given_and_test_is_carved(ml, capsys):
    image_splits(ml, {"train": {"ants": 20, "bees": 16}, "val": {"ants": 5, "bees": 4}})
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "splits given: train, validation; carved from train (seeded, stratified): test -> train 31, validation 9, test 5" in out
    val = read_image_split(ml.outputs["validation"])
    assert len(val) == 9 and {r["class_name"] for r in val} == {"ants", "bees"}
    for split, origin in (("train", "given"), ("validation", "given"), ("test", "carved")):
        manifest = ml.manifest(split)
        assert manifest.class_names == ("ants", "bees") and manifest.origin == origin
    # No record moved into the given validation split: its images are exactly val/'s.
    written = {(ml.raw_dir / "val" / name / f).read_bytes() for name in ("ants", "bees")
               for f in __import__("os").listdir(ml.raw_dir / "val" / name)}
    assert {r["image"] for r in val} == written


def test_a_class_absent_from_a_given_split_is_said_and_kept(ml, capsys):
    image_splits(ml, {"Training": {"ants": 10, "bees": 10}, "VAL": {"ants": 3}, "test": {"bees": 3}})
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "the given validation split has no example of class(es) 'bees'" in out
    assert "the given test split has no example of class(es) 'ants'" in out
    assert ml.manifest("test").num_classes == 2


@pytest.mark.parametrize(
    "splits, message",
    [
        ({"train": {"ants": 10}, "val": {"ants": 3, "bees": 3}},
         r"class 'bees' has 3 example\(s\) in the validation split but none in train; add training examples of it"),
        ({"val": {"ants": 3, "bees": 3}}, r"given splits validation but no train split"),
    ],
)
def test_refused_image_splits_write_nothing(ml, splits, message):
    image_splits(ml, splits)
    assert main([]) == 1
    assert __import__("re").search(message, ml.message.read_text()), ml.message.read_text()
    assert ml.leftovers() == []


def test_mixed_split_and_class_folders_are_refused(ml):
    image_splits(ml, {"train": {"ants": 10, "bees": 10}})
    write_image_tree(ml.raw_dir, {"cats": 3})
    assert main([]) == 1
    assert "mixes split folders (train/) with other folders (cats/)" in ml.message.read_text()
    assert ml.leftovers() == []


def write_labelled_csv(path, x, names, label_first=True, label="species"):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join([label] + [f"f{i}" for i in range(x.shape[1])] if label_first else
                      [f"f{i}" for i in range(x.shape[1])] + [label])]
    for row, name in zip(x, names, strict=True):
        cells = [repr(float(v)) for v in row]
        lines.append(",".join([name] + cells if label_first else cells + [name]))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("layout", ["files", "folders"])
def test_table_splits_with_string_labels_in_the_first_column(ml, capsys, layout):
    x, y = labelled_data(per_class=(30, 30, 20))
    names = np.array(["Gentoo", "Adelie", "Chinstrap"])[y]
    test_x, test_y = labelled_data(per_class=(4, 4, 4), seed=1)
    if layout == "files":
        train_path, test_path = ml.raw_dir / "train.csv", ml.raw_dir / "test.csv"
    else:
        train_path, test_path = ml.raw_dir / "Train" / "part.csv", ml.raw_dir / "eval" / "part.csv"
    write_labelled_csv(train_path, x, names)
    write_labelled_csv(test_path, test_x, np.array(["Gentoo", "Adelie", "Chinstrap"])[test_y])
    assert main(["--label-column", "species"]) == 0
    assert "splits given: train, test; carved from train (seeded, stratified): validation -> train 68, validation 12, test 12" in capsys.readouterr().out
    manifest = ml.manifest("train")
    assert manifest.class_names == ("Adelie", "Chinstrap", "Gentoo")
    assert (manifest.num_features, manifest.label_column, manifest.origin) == (4, "species", "given")
    assert ml.manifest("validation").origin == "carved"
    _, labels = ml.read_split("test")
    # Gentoo (class 0 in the file's order) is class 2 by name.
    assert sorted(np.bincount(labels).tolist()) == [4, 4, 4]


def test_given_split_keeps_given_records_and_carves_stratified():
    labels = np.array([0] * 20 + [1] * 10 + [0, 1, 0])
    given = {"train": np.arange(30), "test": np.arange(30, 33)}
    order, origin = given_split(labels, given, ("a", "b"), 0.2, 0.2, seed=3)
    assert origin == {"train": "given", "validation": "carved", "test": "given"}
    assert sorted(order["test"].tolist()) == [30, 31, 32]
    assert np.bincount(labels[order["validation"]]).tolist() == [4, 2]
    assert sorted(np.concatenate([order["train"], order["validation"]]).tolist()) == list(range(30))
    again, _ = given_split(labels, given, ("a", "b"), 0.2, 0.2, seed=3)
    assert all(np.array_equal(order[s], again[s]) for s in order)
