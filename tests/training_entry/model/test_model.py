"""The model, its SavedModel for serving, and initial weights from the ``init`` channel."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest
import tensorflow as tf

from training_entry import contract
from training_entry.model.init_weights import InitError, load_initial_weights
from training_entry.model.network import INPUT_NAME, OUTPUT_NAME, build_model, save_for_serving


@pytest.fixture
def policy():
    yield tf.keras.mixed_precision.set_global_policy
    tf.keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("name", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_outputs_float32_probabilities_under_every_policy(policy, name):
    policy(name)
    model = build_model(64, 10)
    assert model.input_names == [INPUT_NAME]
    out = model(np.random.default_rng(0).uniform(0, 16, (5, 64)).astype("float32"))
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert (out.numpy() >= 0).all()
    if name != "float32":
        assert model.get_layer("dense_0").compute_dtype == name.split("_")[1]


def test_standardises_raw_input_with_the_manifest_statistics():
    mean, std = [8.0] * 4, [2.0, 4.0, 1.0, 0.5]
    model = build_model(4, 3, mean, std)
    standardize = model.get_layer("standardize")
    raw = np.array([[8.0, 12.0, 9.0, 7.0]], dtype="float32")
    np.testing.assert_allclose(standardize(raw).numpy(), [[0.0, 1.0, 1.0, -2.0]], atol=1e-6)
    assert "standardize" not in [layer.name for layer in build_model(4, 3).layers]


def test_saved_model_serves_probabilities_under_x(tmp_path):
    model = build_model(64, 10)
    path = save_for_serving(model, str(tmp_path / "model"), "1")
    assert path == str(tmp_path / "model" / "1")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["1"]
    serving = tf.saved_model.load(path).signatures["serving_default"]
    x = np.ones((2, 64), "float32")
    out = serving(**{INPUT_NAME: tf.constant(x)})
    assert sorted(out) == [contract.SERVING_CLASSES, OUTPUT_NAME]
    np.testing.assert_allclose(out[OUTPUT_NAME].numpy(), model(x).numpy(), rtol=1e-5)
    # No class names in the manifest (labels 0..K-1): the classes are the indices as text.
    expected = [str(i).encode() for i in model(x).numpy().argmax(axis=1)]
    assert list(out[contract.SERVING_CLASSES].numpy()) == expected
    save_for_serving(model, str(tmp_path / "model"), "1")  # a reused tree: replaced, not nested
    assert sorted(p.name for p in (tmp_path / "model" / "1").iterdir()) == sorted(
        ["assets", "fingerprint.pb", "keras_metadata.pb", "saved_model.pb", "variables"])


def _source_model(seed=3):
    tf.keras.utils.set_random_seed(seed)
    return build_model(64, 10)


def _same_weights(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights(), strict=True))


@pytest.mark.parametrize("layout", ["archive", "saved_model", "h5", "checkpoint"])
def test_initial_weights_from_every_accepted_layout(tmp_path, layout):
    source = _source_model()
    init = tmp_path / "init"
    init.mkdir()
    if layout == "archive":  # what a previous training job uploaded: model.tar.gz with 1/
        save_for_serving(source, str(tmp_path / "model"), "1")
        with tarfile.open(init / "model.tar.gz", "w:gz") as tar:
            tar.add(tmp_path / "model" / "1", arcname="1")
    elif layout == "saved_model":
        save_for_serving(source, str(init), "3")
    elif layout == "h5":
        source.save_weights(str(init / "weights.h5"))
    else:
        source.save_weights(str(init / "ckpt"))
    target = _source_model(seed=9)
    assert not _same_weights(source, target)
    assert load_initial_weights(target, str(init)).split()[0] == ("h5" if layout == "h5" else
                                                                  "checkpoint" if layout == "checkpoint" else "saved_model")
    assert _same_weights(source, target)


def test_initial_weights_that_do_not_fit(tmp_path):
    save_for_serving(build_model(32, 10), str(tmp_path / "init"), "1")
    with pytest.raises(InitError, match=r"init model .*/1 has weights of shapes .* but this model needs"):
        load_initial_weights(_source_model(), str(tmp_path / "init"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("")
    with pytest.raises(InitError) as info:
        load_initial_weights(_source_model(), str(tmp_path / "empty"))
    assert str(info.value) == (f"init channel {tmp_path}/empty holds notes.txt; expected a model.tar.gz, a "
                               f"SavedModel directory, a Keras .h5 weights file or a TF checkpoint")


def test_init_archive_with_a_link_is_refused(tmp_path):
    (tmp_path / "init").mkdir()
    with tarfile.open(tmp_path / "init" / "model.tar.gz", "w:gz") as tar:
        link = tarfile.TarInfo("1/saved_model.pb")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(InitError, match=r"member '1/saved_model.pb' is a symbolic link \(-> '/etc/passwd'\)"):
        load_initial_weights(_source_model(), str(tmp_path / "init"))
