"""processing.contract.data_kind: which kind of data a listing of InputDataUri holds."""

from __future__ import annotations

import pytest

from processing.contract import (
    DataKindError,
    class_of,
    data_kind,
    image_classes,
    split_of,
    table_splits,
)
from training_entry.input.records import KIND_IMAGE, KIND_TABLE


@pytest.mark.parametrize(
    "keys",
    [
        ["data.csv"],
        ["nested/data.NPZ", "README.md"],  # other files next to a table are left alone
        ["data.csv", ".hidden/cat/a.jpg"],
    ],
)
def test_a_table(keys):
    assert data_kind(keys) == KIND_TABLE


@pytest.mark.parametrize(
    "keys",
    [
        ["cat/a.jpg", "dog/b.PNG", "dog/c.jpeg"],
        ["cat/2019/a.jpg", "dog/b.png", "cat/.DS_Store", ".manifest"],  # deeper files count for their class
        ["/cat/a.jpg", "dog//b.png"],
    ],
)
def test_an_image_tree(keys):
    assert data_kind(keys) == KIND_IMAGE


CASES = [
    ([], r"^no raw data under InputDataUri \(it is empty\); point it at a prefix holding one \.csv or \.npz file or an image tree <class name>/<image> \(\.jpg/\.jpeg/\.png\)$"),
    ([".hidden", "notes.txt"], r"^no raw data under InputDataUri \(it holds only notes\.txt\)"),
    (["data.csv", "cat/a.jpg", "dog/b.png"], r"^InputDataUri mixes table data \(data\.csv\) with 2 image\(s\) \(e\.g\. cat/a\.jpg\); point it at a prefix holding either one \.csv or \.npz file or an image tree"),
    (["a.jpg", "cat/b.jpg"], r"^image a\.jpg is not in a class folder \(1 such image\(s\) at the top of InputDataUri\); move each image into a folder named for its class: <class name>/a\.jpg$"),
    (["cat/a.jpg", "cat/labels.txt", "dog/b.gif"], r"^cat/labels\.txt is not a \.jpg/\.jpeg/\.png image but sits in the image tree \(2 such file\(s\)\); convert it to JPEG/PNG or move it out of InputDataUri$"),
]


@pytest.mark.parametrize("keys, message", CASES)
def test_refusals_are_one_line_naming_a_file_and_the_fix(keys, message):
    with pytest.raises(DataKindError, match=message) as caught:
        data_kind(keys)
    assert "\n" not in str(caught.value)


def test_class_of_is_the_first_folder():
    assert class_of("cat/2019/a.jpg") == "cat"
    assert class_of("/dog/b.png") == "dog"


def test_the_parameter_named_in_messages_is_the_pipelines():
    from pipeline.definition import parameters
    from processing import contract

    assert contract._INPUT_PARAMETER == parameters.INPUT_DATA_URI


# --- Given splits ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "keys",
    [
        ["train/ants/a.jpg", "val/bees/b.jpg", "train/bees/c.jpg"],
        ["TRAINING/ants/a.jpg", "Valid/ants/b.jpg", "Testing/ants/c.jpg", "train/bees/d.jpg"],  # one split twice
    ],
)
def test_split_folders_are_splits_not_classes(keys):
    if any(k.startswith("TRAINING") for k in keys):
        with pytest.raises(DataKindError, match=r"gives the train split twice \(TRAINING/, train/\); keep one of them"):
            data_kind(keys)
        return
    assert data_kind(keys) == KIND_IMAGE
    assert image_classes(keys) == ("ants", "bees")
    assert class_of("train/ants/a.jpg", given_splits=True) == "ants"


def test_classes_without_split_folders_are_the_top_folders():
    assert image_classes(["cat/a.jpg", "dog/x/b.png", "dog/c.jpg"]) == ("cat", "dog")


@pytest.mark.parametrize("name, split", [("train", "train"), ("Training", "train"), ("VAL", "validation"),
                                         ("valid", "validation"), ("dev", "validation"), ("Test", "test"),
                                         ("testing", "test"), ("eval", "test"), ("cats", None)])
def test_split_names_are_case_insensitive(name, split):
    assert split_of(name) == split


@pytest.mark.parametrize(
    "keys, given",
    [
        (["train.csv", "test.csv"], {"train": "train.csv", "test": "test.csv"}),
        (["Train.CSV", "validation.npz"], {"train": "Train.CSV", "validation": "validation.npz"}),
        (["train/data.csv", "dev/data.csv", "eval/data.csv"],
         {"train": "train/data.csv", "validation": "dev/data.csv", "test": "eval/data.csv"}),
        (["penguins.csv"], {}),
    ],
)
def test_table_splits(keys, given):
    assert data_kind(keys) == KIND_TABLE
    assert table_splits([k.split("/") for k in keys]) == given


SPLIT_REFUSALS = [
    (["train/ants/a.jpg", "cats/b.jpg"], r"^InputDataUri mixes split folders \(train/\) with other folders \(cats/\); either put every class folder inside split folders"),
    (["train/a.jpg", "train/b.jpg", "val/ants/c.jpg"], r"^image train/a\.jpg sits directly in split folder train/ \(2 such image\(s\)\); a split folder holds class folders: move it to train/<class name>/a\.jpg$"),
    (["train.csv", "extra.csv"], r"^InputDataUri holds split tables \(train\.csv\) and extra\.csv, which names no split"),
    (["a.csv", "b.csv"], r"^2 table files under InputDataUri \(a\.csv, b\.csv\)"),
    (["train.csv", "training/data.csv"], r"gives the train split twice"),
]


@pytest.mark.parametrize("keys, message", SPLIT_REFUSALS)
def test_refused_split_layouts_are_one_line(keys, message):
    with pytest.raises(DataKindError, match=message) as caught:
        data_kind(keys)
    assert "\n" not in str(caught.value)


def test_the_label_column_parameter_is_named_as_the_pipeline_names_it():
    from pipeline.definition import parameters
    from processing import contract

    assert contract.LABEL_COLUMN_PARAMETER == parameters.LABEL_COLUMN
    assert parameters.BY_NAME[parameters.LABEL_COLUMN].default == contract.LABEL_COLUMN
