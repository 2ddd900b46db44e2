"""The hand-written tf.train.Example reader against TensorFlow's own encoder (``training_torch/examples.py``)."""

from __future__ import annotations

import pytest

from training_entry.input import records
from training_torch.examples import parse_example

tf = pytest.importorskip("tensorflow")


def test_tables_and_images_read_as_tensorflow_wrote_them():
    from training_entry.input.examples import serialize, serialize_image

    table = parse_example(serialize([0.5, -1.25, 3e9], 7))
    assert table[records.FEATURE_X] == pytest.approx([0.5, -1.25, 3e9])
    assert table[records.FEATURE_Y] == [7]
    image = parse_example(serialize_image(b"\xff\xd8jpeg-bytes", 2, "bees", 64, 48))
    assert image[records.FEATURE_IMAGE] == [b"\xff\xd8jpeg-bytes"]
    assert image[records.FEATURE_CLASS_NAME] == [b"bees"]
    assert (image[records.FEATURE_Y], image[records.FEATURE_HEIGHT], image[records.FEATURE_WIDTH]) == ([2], [64], [48])


def test_negative_and_unpacked_values_and_a_damaged_record():
    example = tf.train.Example(features=tf.train.Features(feature={
        "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[-3, 2**40])),
        "empty": tf.train.Feature(float_list=tf.train.FloatList(value=[])),
    })).SerializeToString()
    parsed = parse_example(example)
    assert parsed["n"] == [-3, 2**40] and parsed["empty"] == []
    with pytest.raises(ValueError):
        parse_example(example[:-3])
