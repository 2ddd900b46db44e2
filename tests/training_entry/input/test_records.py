"""training_entry.input.records / examples: the record and manifest formats, tables and images."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from training_entry.input import examples, records


def test_an_image_example_holds_the_file_bytes_as_they_are_and_parses_with_the_spec():
    encoded = tf.io.encode_png(tf.zeros([5, 7, 3], tf.uint8)).numpy()
    payload = examples.serialize_image(encoded, 2, "chat noir", 5, 7)
    parsed = tf.io.parse_example(tf.constant([payload]), examples.image_feature_spec())
    assert parsed[records.FEATURE_IMAGE].numpy()[0] == encoded
    assert parsed[records.FEATURE_Y].numpy().tolist() == [2]
    assert parsed[records.FEATURE_CLASS_NAME].numpy()[0].decode() == "chat noir"
    assert parsed[records.FEATURE_HEIGHT].numpy().tolist() == [5]
    assert parsed[records.FEATURE_WIDTH].numpy().tolist() == [7]
    assert tf.io.decode_image(parsed[records.FEATURE_IMAGE][0]).shape == (5, 7, 3)


def test_an_image_manifest_round_trips_with_kind_and_class_names(tmp_path):
    manifest = records.Manifest(
        "test", 0, 2, {"test-00000-of-00001.tfrecord": 9}, kind=records.KIND_IMAGE, class_names=("cat", "dog")
    )
    path = tmp_path / "test.json"
    path.write_text(manifest.to_json())
    doc = json.loads(path.read_text())
    assert doc["kind"] == "image" and doc["class_names"] == ["cat", "dog"]
    assert records.Manifest.load(str(path)) == manifest


def test_a_table_manifest_says_table_and_one_without_kind_still_loads_as_a_table(tmp_path):
    manifest = records.Manifest("train", 4, 3, {"train-00000-of-00001.tfrecord": 5})
    doc = json.loads(manifest.to_json())
    assert doc["kind"] == "table" and "class_names" not in doc
    del doc["kind"]  # written before images existed
    path = tmp_path / "train.json"
    path.write_text(json.dumps(doc))
    assert records.Manifest.load(str(path)) == manifest


def test_an_image_manifest_without_class_names_is_malformed(tmp_path):
    path = tmp_path / "train.json"
    doc = json.loads(records.Manifest("train", 0, 2, {"a": 1}, kind="image", class_names=("a", "b")).to_json())
    del doc["class_names"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="malformed .*an image manifest needs 2 class names"):
        records.Manifest.load(str(path))
