"""ModelArchitecture -> model; the data-kind refusal; the user's model file and its refusals;
transfer-learning phases and the backbone init file."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from training_entry import contract
from training_entry.config import Hyperparameters
from training_entry.input.records import KIND_IMAGE, KIND_TABLE
from training_entry.model import architectures, init_backbone, init_weights, transfer
from training_entry.model.architectures import ModelError


@pytest.mark.parametrize("architecture", contract.IMAGE_ARCHITECTURES)
def test_every_image_architecture_outputs_probabilities(architecture):
    model = architectures.build(architecture, num_classes=4, image_size=32)
    x = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype(np.float32)
    out = model(x, training=False).numpy()
    assert out.shape == (2, 4)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-5)
    assert (architectures.backbone_of(model) is not None) == (architecture in contract.PRETRAINED_ARCHITECTURES)


def test_auto_and_the_refusal_of_what_does_not_fit_the_data():
    assert architectures.resolve("auto", KIND_TABLE, None) == "mlp"
    assert architectures.resolve("auto", KIND_IMAGE, None) == "small_cnn"
    assert architectures.resolve("auto", KIND_IMAGE, "/x/my_model.py") == "custom"
    with pytest.raises(ModelError, match="--model-architecture resnet50 does not fit table data; use one of mlp"):
        architectures.resolve("resnet50", KIND_TABLE, None)
    with pytest.raises(ModelError, match="--model-architecture mlp does not fit image data"):
        architectures.resolve("mlp", KIND_IMAGE, None)
    with pytest.raises(ModelError, match="no model file was shipped"):
        architectures.resolve("custom", KIND_IMAGE, None)


GOOD_USER_MODEL = '''
import tensorflow as tf

def build_model(input_shape, num_classes, hyperparameters):
    inputs = tf.keras.Input(input_shape)
    x = tf.keras.layers.Rescaling(1 / 255)(inputs)
    x = tf.keras.layers.Flatten()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_classes, activation="softmax")(x))
'''


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import not_a_module_anywhere\n", "model file my_model.py failed to import: ModuleNotFoundError"),
        ("def build(input_shape, num_classes, hyperparameters):\n    pass\n",
         "model file my_model.py defines no function build_model"),
        (GOOD_USER_MODEL.replace("Dense(num_classes", "Dense(7"),
         r"model file my_model.py: the model outputs \(1, 7\) for one input; it must output one tensor \[batch, 3\]"),
        ("def build_model(input_shape, num_classes, hyperparameters):\n    return 42\n",
         "returned int, not a tf.keras.Model"),
    ],
)
def test_a_broken_user_model_is_refused_with_one_line(tmp_path, source, message):
    path = tmp_path / "my_model.py"
    path.write_text(source)
    with pytest.raises(ModelError, match=message) as caught:
        architectures.build("custom", num_classes=3, image_size=32, user_model_file=str(path))
    assert "\n" not in str(caught.value)


def test_the_user_model_gets_the_shape_classes_and_hyperparameters(tmp_path):
    path = tmp_path / "my_model.py"
    path.write_text(GOOD_USER_MODEL)
    model = architectures.build("custom", num_classes=3, image_size=32, user_model_file=str(path),
                                hyperparameters={"epochs": 1})
    assert model.input_shape == (None, 32, 32, 3) and model.output_shape == (None, 3)
    table = architectures.build("custom", num_classes=5, num_features=64, user_model_file=str(path))
    assert table.input_shape == (None, 64) and table.output_shape == (None, 5)


def test_phases_freeze_the_backbone_then_unfreeze_its_top_without_batchnorm():
    model = architectures.build("mobilenet_v2", num_classes=3, image_size=32)
    backbone = architectures.backbone_of(model)
    hp = Hyperparameters(epochs=5, head_epochs=2, fine_tune_layers=10, fine_tune_lr_factor=0.1)
    head, fine = transfer.phases(model, hp)
    assert (head.first_epoch, head.end_epoch, head.lr_factor) == (0, 2, 1.0)
    assert (fine.first_epoch, fine.end_epoch, fine.lr_factor) == (2, 5, 0.1)
    assert transfer.phase_at([head, fine], 0) == 0 and transfer.phase_at([head, fine], 2) == 1
    assert transfer.phase_at([head, fine], 5) == 2

    transfer.set_trainable(model, head, hp.fine_tune_layers)
    assert not backbone.trainable
    assert {v.name for v in model.trainable_variables} == {"logits/kernel:0", "logits/bias:0"}
    transfer.set_trainable(model, fine, hp.fine_tune_layers)
    top = backbone.layers[-10:]
    trainable_layers = [layer for layer in backbone.layers if layer.trainable and layer.weights]
    assert trainable_layers and all(layer in top for layer in trainable_layers)
    assert not any(isinstance(layer, tf.keras.layers.BatchNormalization) for layer in trainable_layers)
    # A model without a backbone trains in one phase.
    cnn = architectures.build("small_cnn", num_classes=3, image_size=32)
    assert [p.name for p in transfer.phases(cnn, hp)] == [transfer.ALL]


def test_a_backbone_without_pretrained_weights_is_never_frozen():
    """Issue 36: no init channel, random backbone weights: the whole network trains."""
    model = architectures.build("mobilenet_v2", num_classes=2, image_size=32)
    hp = Hyperparameters(epochs=5, head_epochs=2, fine_tune_layers=10, fine_tune_lr_factor=0.1)
    (only,) = transfer.phases(model, hp, pretrained=False)
    assert (only.name, only.first_epoch, only.end_epoch, only.lr_factor) == (transfer.ALL, 0, 5, 1.0)
    assert transfer.set_trainable(model, only, hp.fine_tune_layers) == "all layers train"
    backbone = architectures.backbone_of(model)
    assert backbone.trainable and any(v.name.startswith("Conv1") for v in model.trainable_variables)


def test_the_backbone_file_loads_into_the_models_backbone(tmp_path):
    path, _ = init_backbone.write("mobilenet_v2", 32, "random", str(tmp_path / "init"))
    expected = architectures.make_backbone("mobilenet_v2", 32)
    expected.load_weights(path)
    model = architectures.build("mobilenet_v2", num_classes=3, image_size=32)
    backbone = architectures.backbone_of(model)
    assert transfer.weights_digest(backbone) != transfer.weights_digest(expected)
    loaded = init_weights.load_initial_weights(model, str(tmp_path / "init"), backbone)
    assert loaded.startswith("backbone weights")
    assert transfer.weights_digest(backbone) == transfer.weights_digest(expected)
