"""pipeline.data.kind before any job: split folders are splits, not classes."""

from __future__ import annotations

import pytest

from pipeline.data.kind import check_input_data
from pipeline.definition import parameters as P
from pipeline.local.store.storage import LocalStorage


@pytest.fixture
def store(tmp_path):
    storage = LocalStorage(tmp_path / "store")
    for key in ("ants/train/ants/1.jpg", "ants/val/bees/2.jpg", "ants/train/bees/3.jpg",
                "mixed/train/ants/1.jpg", "mixed/cats/2.jpg",
                "tables/train.csv", "tables/Test.csv"):
        storage.put_bytes(b"0", f"s3://bkt/{key}")
    return storage


def values(uri: str):
    return P.resolve({P.INPUT_DATA_URI: uri}, bucket="bkt", prefix="p")


def test_given_splits_are_an_image_tree_and_split_tables_a_table(store):
    assert check_input_data(store, values("s3://bkt/ants/"), False) == "image"
    assert check_input_data(store, values("s3://bkt/tables/"), False) == "table"


def test_a_top_level_mixing_split_and_class_folders_is_refused_before_any_job(store):
    with pytest.raises(P.ParameterError, match=r"^InputDataUri=s3://bkt/mixed/: InputDataUri mixes split folders "
                                               r"\(train/\) with other folders \(cats/\)"):
        check_input_data(store, values("s3://bkt/mixed/"), False)
