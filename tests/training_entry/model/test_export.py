"""The exported image model: serving_default (float images) and serving_bytes (encoded files)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from training_entry import contract
from training_entry.input import images
from training_entry.model import architectures
from training_entry.model.network import save_for_serving

SIZE = 32
CLASSES = 3


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = architectures.small_cnn(SIZE, CLASSES)
    path = save_for_serving(model, str(tmp_path_factory.mktemp("model")), contract.MODEL_VERSION, SIZE)
    return model, path


def _photo(height: int, width: int, channels: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def test_serving_bytes_takes_png_and_jpeg_of_any_size_and_matches_the_float_signature(exported):
    model, path = exported
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {contract.SIGNATURE_DEFAULT, contract.SIGNATURE_BYTES}
    by_bytes = loaded.signatures[contract.SIGNATURE_BYTES]
    by_float = loaded.signatures[contract.SIGNATURE_DEFAULT]
    # The input and output keys are the contract's (what evaluation and endpoint clients send).
    assert list(by_bytes.structured_input_signature[1]) == [contract.SERVING_INPUT_IMAGE_BYTES]
    assert list(by_float.structured_input_signature[1]) == [contract.SERVING_INPUT_IMAGES]
    assert set(by_bytes.structured_outputs) == {contract.SERVING_OUTPUT, contract.SERVING_CLASSES}

    grey_png = tf.io.encode_png(_photo(20, 28, 1, 0)).numpy()
    colour_jpeg = tf.io.encode_jpeg(_photo(64, 48, 3, 1)).numpy()
    encoded = tf.constant([grey_png, colour_jpeg])
    probabilities = by_bytes(**{contract.SERVING_INPUT_IMAGE_BYTES: encoded})[contract.SERVING_OUTPUT].numpy()
    assert probabilities.shape == (2, CLASSES)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)

    # The same pixels through the float signature: decode + resize as training's evaluation path.
    pixels = tf.stack([images.resize(images.decode(e), SIZE) for e in [grey_png, colour_jpeg]])
    direct = by_float(**{contract.SERVING_INPUT_IMAGES: pixels})[contract.SERVING_OUTPUT].numpy()
    np.testing.assert_allclose(probabilities, direct, atol=1e-5)
    np.testing.assert_allclose(direct, model(pixels, training=False).numpy(), atol=1e-5)


def test_keras_loads_the_export_as_evaluation_does(exported):
    model, path = exported
    reloaded = tf.keras.models.load_model(path, compile=False)
    x = np.random.default_rng(2).uniform(0, 255, (4, SIZE, SIZE, 3)).astype(np.float32)
    np.testing.assert_allclose(reloaded.predict_on_batch(x), model(x, training=False).numpy(), atol=1e-5)


def test_augmentation_keeps_the_shape_and_range_and_only_training_augments():
    image = tf.constant(_photo(30, 40, 3, 3))
    for augmentation in contract.AUGMENTATIONS:
        out = images.augment(image, SIZE, augmentation)
        assert out.shape == (SIZE, SIZE, 3) and out.dtype == tf.float32
        assert float(tf.reduce_min(out)) >= 0.0 and float(tf.reduce_max(out)) <= 255.0
    record = tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.encode_png(image).numpy()])),
        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[2])),
    })).SerializeToString()
    evaluated = [images.parse_example(tf.constant(record), SIZE, training=False)[0] for _ in range(2)]
    np.testing.assert_array_equal(evaluated[0], evaluated[1])  # no randomness outside training
    trained = [images.parse_example(tf.constant(record), SIZE, training=True)[0] for _ in range(4)]
    assert any(not np.array_equal(trained[0], t) for t in trained[1:])


def test_every_signature_carries_the_class_names(tmp_path):
    model = architectures.small_cnn(SIZE, CLASSES)
    names = ["cat", "dog", "emu"]
    loaded = tf.saved_model.load(save_for_serving(model, str(tmp_path), "1", SIZE, class_names=names))
    pixels = tf.constant(np.random.default_rng(4).uniform(0, 255, (3, SIZE, SIZE, 3)).astype(np.float32))
    out = loaded.signatures[contract.SIGNATURE_DEFAULT](**{contract.SERVING_INPUT_IMAGES: pixels})
    best = out[contract.SERVING_OUTPUT].numpy().argmax(axis=1)
    assert [c.decode() for c in out[contract.SERVING_CLASSES].numpy()] == [names[i] for i in best]
    encoded = tf.constant([tf.io.encode_png(tf.cast(p, tf.uint8)).numpy() for p in pixels])
    by_bytes = loaded.signatures[contract.SIGNATURE_BYTES](**{contract.SERVING_INPUT_IMAGE_BYTES: encoded})
    assert by_bytes[contract.SERVING_CLASSES].shape == (3,)
