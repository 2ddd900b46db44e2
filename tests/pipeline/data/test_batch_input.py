"""BatchInputUri checked before any job (pipeline/data/batch_input.py): objects there, and of
the kind the model trains on."""

from __future__ import annotations

import pytest

from pipeline.data.batch_input import check_batch_input
from pipeline.definition import parameters as P
from pipeline.local.store.storage import LocalStorage
from training_entry.input.records import KIND_IMAGE, KIND_TABLE

PREFIX = "s3://bucket/new/"


@pytest.fixture
def store(tmp_path):
    return LocalStorage(tmp_path / "store")


def test_empty_means_no_batch_inference_and_nothing_is_listed(store):
    assert check_batch_input(store, {P.BATCH_INPUT_URI: ""}, KIND_TABLE) == 0
    assert check_batch_input(store, {}, KIND_IMAGE) == 0


def test_objects_of_the_trained_kind_pass(store):
    store.put_bytes(b"1,2\n", PREFIX + "a.csv")
    store.put_bytes(b"3,4\n", PREFIX + "more/b.txt")
    assert check_batch_input(store, {P.BATCH_INPUT_URI: PREFIX}, KIND_TABLE) == 2
    store.put_bytes(b"png", "s3://bucket/photos/cat/1.PNG")
    assert check_batch_input(store, {P.BATCH_INPUT_URI: "s3://bucket/photos/"}, KIND_IMAGE) == 1


@pytest.mark.parametrize("objects, kind, message", [
    ({}, KIND_TABLE, f"BatchInputUri={PREFIX}: no objects under it; put the data to predict there, or leave "
                     "BatchInputUri empty"),
    ({"a.jpg": b"jpg", "notes.txt": b"x"}, KIND_IMAGE, f"{PREFIX}notes.txt is not a .jpg/.jpeg/.png image"),
    ({"a.csv": b"1\n", "b.png": b"png"}, KIND_TABLE, f"{PREFIX}b.png is an image, and the model trained on "
                                                     "the table of InputDataUri takes CSV rows"),
])
def test_what_cannot_go_through_the_model_is_one_line(store, objects, kind, message):
    for name, data in objects.items():
        store.put_bytes(data, PREFIX + name)
    with pytest.raises(P.ParameterError, match=message) as refused:
        check_batch_input(store, {P.BATCH_INPUT_URI: PREFIX}, kind)
    assert "\n" not in str(refused.value)
