"""The model of a table of typed columns: the encoding inside the model, an MLP, softmax out.

Every column is encoded by Keras preprocessing layers built from the manifest's schema (the
train split's statistics and vocabularies, computed once by processing), so the exported
SavedModel takes raw rows as the CSV has them and training, evaluation and serving cannot
drift apart:

- numeric: a missing value (NaN) is imputed with the train mean, then the value is
  standardised with the train mean and std; a missing-indicator input (1 where missing) sits
  beside it;
- categorical: the train vocabulary (missing, "" after ``typed_examples.MISSING``, is a value
  of its own) plus one out-of-vocabulary bucket, one-hot;
- hashed (more than 1,000 distinct train values): hashed into ``bins`` buckets, each bucket a
  learned 8-dimensional embedding.

Two serving signatures, both returning ``probabilities`` [batch, classes] and ``classes``
[batch] (the predicted class name): ``serving_default`` takes one tensor per kept column
(float32 with NaN for missing, or string), ``serving_csv`` a batch of CSV lines (every
feature column in the training header's order, label left out). Python 3.10 syntax.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from training_entry import contract
from training_entry.input import typed_examples
from training_entry.model.network import DROPOUT, HIDDEN_UNITS

EMBEDDING_DIM = 8
SIGNATURE_CSV = "serving_csv"
SERVING_INPUT_CSV = "csv_lines"  # tf.string [None]
SERVING_CLASSES = getattr(contract, "SERVING_CLASSES", "classes")


@tf.keras.utils.register_keras_serializable(package="trainpipe")
class NumericEncoding(tf.keras.layers.Layer):
    """[batch] float (NaN = missing) -> [batch, 2]: standardised value (train-mean imputed), missing indicator."""

    def __init__(self, mean: float, std: float, **kwargs):
        super().__init__(dtype="float32", **{k: v for k, v in kwargs.items() if k != "dtype"})
        self.mean, self.std = float(mean), float(std) or 1.0

    def call(self, x):
        x = tf.cast(x, tf.float32)
        gap = tf.logical_not(tf.math.is_finite(x))
        value = tf.where(gap, self.mean, x)
        return tf.stack([(value - self.mean) / self.std, tf.cast(gap, tf.float32)], axis=-1)

    def get_config(self):
        return {**super().get_config(), "mean": self.mean, "std": self.std}


@tf.keras.utils.register_keras_serializable(package="trainpipe")
class MissingAsEmpty(tf.keras.layers.Layer):
    """Strip each cell; a missing one (``typed_examples.MISSING``, any case) becomes ""."""

    def call(self, x):
        text = tf.strings.strip(x)
        return tf.where(typed_examples.is_missing(text), "", text)


def check_architecture(architecture: str, label_column: str | None) -> None:
    """A table of typed columns takes this module's model alone (ModelArchitecture mlp or auto)."""
    if architecture != contract.ARCH_MLP:
        raise ValueError(
            f"model {architecture} takes a float vector, but {label_column!r}'s table has categorical "
            f"columns or missing values (typed columns); train it with ModelArchitecture=mlp (or auto)")


def build_tabular_model(schema: Sequence[dict], num_classes: int) -> tf.keras.Model:
    columns = typed_examples.kept(schema)
    if not columns or num_classes < 2:
        raise ValueError(f"need >= 1 kept column and >= 2 classes, got {len(columns)} and {num_classes}")
    specs = typed_examples.input_specs(schema)
    inputs = {key: tf.keras.Input(shape=(), dtype=spec.dtype, name=key) for key, spec in specs.items()}
    encoded = []
    for column in columns:
        key, x = column["key"], inputs[column["key"]]
        if column["type"] == typed_examples.NUMERIC:
            encoded.append(NumericEncoding(column["mean"], column["std"], name=f"{key}_numeric")(x))
            continue
        text = MissingAsEmpty(name=f"{key}_missing")(x)
        if column["type"] == typed_examples.HASHED:
            bins = int(column["bins"])
            hashed = tf.keras.layers.Hashing(bins, name=f"{key}_hashed")(text)
            encoded.append(tf.keras.layers.Embedding(bins, EMBEDDING_DIM, name=f"{key}_embedding")(hashed))
        else:
            encoded.append(tf.keras.layers.StringLookup(
                vocabulary=sorted(set(column["vocabulary"]) | {""}), num_oov_indices=1, output_mode="one_hot",
                name=f"{key}_vocabulary")(text))
    hidden = tf.keras.layers.Concatenate(name="encoded")(
        [tf.keras.layers.Flatten(name=f"flat_{i}")(e) if len(e.shape) > 2 else e for i, e in enumerate(encoded)])
    for i, units in enumerate(HIDDEN_UNITS):
        hidden = tf.keras.layers.Dense(units, activation="relu", name=f"dense_{i}")(hidden)
        hidden = tf.keras.layers.Dropout(DROPOUT, name=f"dropout_{i}")(hidden)
    logits = tf.keras.layers.Dense(num_classes, name="logits")(hidden)
    probabilities = tf.keras.layers.Activation("softmax", dtype="float32", name=contract.SERVING_OUTPUT)(logits)
    return tf.keras.Model(inputs=inputs, outputs=probabilities, name="table_mlp")


def table_description(schema: Sequence[dict], label_column: str | None) -> dict:
    """What the server says a table model takes (``contract.SERVING_TABLE_FILE``): every
    column a CSV line holds, in header order (dropped ones too: the line still has them),
    and the label column that a line must not."""
    return {"columns": [c["name"] for c in schema], "label_column": label_column}


def tabular_signatures(model: tf.keras.Model, schema: Sequence[dict], class_names: Sequence[str]) -> dict:
    """``serving_default`` (one tensor per kept column) and ``serving_csv`` (CSV lines)."""
    names = tf.constant(list(class_names))
    schema = list(schema)

    def answer(inputs):
        probabilities = model(inputs, training=False)
        return {contract.SERVING_OUTPUT: probabilities,
                SERVING_CLASSES: tf.gather(names, tf.argmax(probabilities, axis=-1))}

    @tf.function(input_signature=[typed_examples.input_specs(schema)])
    def serve_columns(columns):
        return answer(columns)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT_CSV)])
    def serve_csv(csv_lines):
        return answer(typed_examples.parse_csv_lines(csv_lines, schema))

    return {contract.SIGNATURE_DEFAULT: serve_columns, SIGNATURE_CSV: serve_csv}
