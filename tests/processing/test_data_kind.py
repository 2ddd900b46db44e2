"""processing.contract.data_kind: which kind of data a listing of InputDataUri holds."""

from __future__ import annotations

import pytest

from processing.contract import DataKindError, class_of, data_kind
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
