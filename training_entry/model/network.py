"""The network: a small MLP over the feature vector, softmax probabilities out.

Evaluation and TF Serving consume its output as class probabilities, so the last layer is a
softmax, not logits. Under a mixed-precision policy the hidden layers compute in float16 or
bfloat16; the softmax is forced to float32 so the probabilities sum to 1 and the loss is
computed in full precision. Python 3.10 syntax.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
from collections.abc import Sequence

import tensorflow as tf

from training_entry import contract
from training_entry.input import images
from training_entry.input.records import FEATURE_X

INPUT_NAME = FEATURE_X  # the serving signature's input key: {"x": [[...features...]]}
OUTPUT_NAME = contract.SERVING_OUTPUT  # the serving signature's output key
HIDDEN_UNITS = (128, 64)
DROPOUT = 0.2


def build_model(
    num_features: int,
    num_classes: int,
    feature_mean: Sequence[float] | None = None,
    feature_std: Sequence[float] | None = None,
) -> tf.keras.Model:
    """``feature_mean``/``feature_std`` (the train split's, from the manifest) standardise the
    raw input inside the model, so evaluation and serving feed raw features as well."""
    if num_features < 1 or num_classes < 2:
        raise ValueError(f"need >= 1 feature and >= 2 classes, got {num_features} and {num_classes}")
    inputs = tf.keras.Input(shape=(num_features,), name=INPUT_NAME, dtype=tf.float32)
    hidden = inputs
    if feature_mean is not None and feature_std is not None:
        hidden = tf.keras.layers.Normalization(
            mean=list(feature_mean), variance=[s * s for s in feature_std], name="standardize"
        )(hidden)
    for i, units in enumerate(HIDDEN_UNITS):
        hidden = tf.keras.layers.Dense(units, activation="relu", name=f"dense_{i}")(hidden)
        hidden = tf.keras.layers.Dropout(DROPOUT, name=f"dropout_{i}")(hidden)
    logits = tf.keras.layers.Dense(num_classes, name="logits")(hidden)
    probabilities = tf.keras.layers.Activation("softmax", dtype="float32", name=OUTPUT_NAME)(logits)
    return tf.keras.Model(inputs=inputs, outputs=probabilities, name="digits_mlp")


def image_signatures(model: tf.keras.Model, image_size: int) -> dict:
    """``serving_default``: float32 images [None, S, S, 3] in 0..255; ``serving_bytes``: the
    encoded files (what an endpoint client sends), decoded and resized as in training
    (``images``, without augmentation). Both return {"probabilities": [None, classes]}."""
    spec = tf.TensorSpec([None, image_size, image_size, images.CHANNELS], tf.float32)

    # The arguments' names are the signatures' input keys (contract.SERVING_INPUT_IMAGES,
    # SERVING_INPUT_IMAGE_BYTES; tests/training_entry/model/test_export.py holds them equal).
    @tf.function(input_signature=[spec])
    def serve_images(images):
        return {contract.SERVING_OUTPUT: model(images, training=False)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve_bytes(image_bytes):
        decoded = images.decode_batch(image_bytes, image_size)
        return {contract.SERVING_OUTPUT: model(decoded, training=False)}

    return {contract.SIGNATURE_DEFAULT: serve_images, contract.SIGNATURE_BYTES: serve_bytes}


def class_names_or_indices(class_names: Sequence[str] | None, num_classes: int) -> tuple[str, ...]:
    """The manifest's class names, or "0".."K-1" where the labels were already integers."""
    return tuple(class_names) if class_names else tuple(str(i) for i in range(num_classes))


def default_signature(model: tf.keras.Model) -> dict:
    """``serving_default`` of a model of one float input (the table MLP's "x", a user's
    model), returning its output as ``probabilities`` whatever its last layer is named."""
    (spec,) = [tf.TensorSpec(i.shape, i.dtype, name=i.name.split(":")[0]) for i in model.inputs]

    @tf.function(input_signature=[spec])
    def serve(features):
        return {contract.SERVING_OUTPUT: model(features, training=False)}

    return {contract.SIGNATURE_DEFAULT: serve}


def with_classes(signatures: dict, class_names: Sequence[str]) -> dict:
    """Every signature with a ``classes`` output beside ``probabilities``: the predicted
    class's name, string [None] (contract.SERVING_CLASSES). A signature that has one already
    keeps its own. The inputs keep their names (the original's specs, names included)."""
    names = tf.constant(list(class_names))
    wrapped = {}
    for key, function in signatures.items():
        concrete = function.get_concrete_function()
        if contract.SERVING_CLASSES in concrete.structured_outputs:
            wrapped[key] = function  # a table's signatures name their classes themselves
            continue
        args, _ = concrete.structured_input_signature
        # A dict of columns keeps its columns' names; a bare tensor takes its argument's.
        specs = [tf.nest.map_structure(lambda s, n=name: _named(s, n), spec)
                 for name, spec in _arguments(function, args)]

        wrapped[key] = tf.function(_adding_classes(concrete, names), input_signature=specs)
    return wrapped


def _adding_classes(concrete, names: tf.Tensor):
    def call(*inputs):
        outputs = dict(concrete(*inputs))
        if contract.SERVING_CLASSES not in outputs:
            best = tf.argmax(outputs[contract.SERVING_OUTPUT], axis=-1)
            outputs[contract.SERVING_CLASSES] = tf.gather(names, best)
        return outputs

    return call


def _arguments(function, args) -> list[tuple[str, object]]:
    parameters = list(inspect.signature(function.python_function).parameters)
    return list(zip(parameters, args, strict=True))


def _named(spec: tf.TensorSpec, name: str) -> tf.TensorSpec:
    return tf.TensorSpec(spec.shape, spec.dtype, name=spec.name or name)


def save_for_serving(
    model: tf.keras.Model, model_dir: str, version: str, image_size: int | None = None,
    signatures: dict | None = None, class_names: Sequence[str] | None = None,
    table: dict | None = None,
) -> str:
    """``<model_dir>/<version>`` as a TF SavedModel (servable by TF Serving as it stands),
    written beside and renamed into place so no reader sees half a model. Without the
    optimizer: Horovod's optimizer class would not deserialize where Horovod is absent.
    ``image_size``: an image model, exported with ``image_signatures``; ``signatures``: a
    model's own (a table of typed columns: ``tabular.tabular_signatures``); else one float
    input (``default_signature``). ``class_names``: the manifest's (None: "0".."K-1"), carried
    by every signature as its ``classes`` output (``with_classes``). ``table``: a table model's
    columns for the server's messages (``tabular.table_description``), written beside it."""
    if image_size:
        signatures = image_signatures(model, image_size)
    elif signatures is None:
        signatures = default_signature(model)
    num_classes = int(model.outputs[0].shape[-1])
    signatures = with_classes(signatures, class_names_or_indices(class_names, num_classes))
    os.makedirs(model_dir, exist_ok=True)
    final = os.path.join(model_dir, version)
    partial = tempfile.mkdtemp(prefix=f".{version}.partial-", dir=model_dir)
    try:
        model.save(partial, include_optimizer=False, save_format="tf", signatures=signatures)
        if table is not None:
            described = os.path.join(partial, contract.SERVING_TABLE_FILE)
            os.makedirs(os.path.dirname(described), exist_ok=True)
            with open(described, "w") as f:
                json.dump(table, f)
        if os.path.exists(final):  # a reused local tree
            shutil.rmtree(final)
        os.rename(partial, final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final
