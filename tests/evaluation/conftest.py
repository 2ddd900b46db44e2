"""Small Keras models saved as training saves them, archived as SageMaker archives them, and an
evaluation container's /opt/ml tree to run the step in."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from evaluation import report
from processing.preprocess import write_shards
from training_entry.contract import BASE_DIR_ENV

FEATURES, CLASSES = 4, 3


def build_model(seed: int) -> tf.keras.Model:
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential(
        [tf.keras.Input(shape=(FEATURES,)), tf.keras.layers.Dense(CLASSES, activation="softmax")]
    )


def always_class_zero() -> tf.keras.Model:
    model = build_model(0)
    kernel, bias = model.layers[0].get_weights()
    model.layers[0].set_weights([np.zeros_like(kernel), np.array([9.0, 0.0, 0.0], np.float32)])
    return model


@pytest.fixture(scope="session")
def saved_models(tmp_path_factory) -> dict[str, Path]:
    """name -> a SavedModel directory (Keras model.save, as training does at <model_dir>/1)."""
    root = tmp_path_factory.mktemp("saved")
    models = {"seeded": build_model(3), "class_zero": always_class_zero()}
    for name, model in models.items():
        model.save(root / name)
    return {name: root / name for name in models}


def make_archive(path: Path, members: dict[str, Path | bytes]) -> Path:
    """A tar.gz whose member ``arcname`` holds a directory tree or the given bytes."""
    with tarfile.open(path, "w:gz") as tar:
        for arcname, source in members.items():
            if isinstance(source, bytes):
                info = tarfile.TarInfo(arcname)
                info.size = len(source)
                tar.addfile(info, io.BytesIO(source))
            else:
                tar.add(source, arcname=arcname)
    return path


def scored_data(records: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, records)
    x = (rng.normal(size=(records, FEATURES)) + y[:, None]).astype(np.float32)
    return x, y


class EvalTree:
    """One evaluation host's /opt/ml, as the processing platform leaves it."""

    def __init__(self, base: Path):
        self.base = base
        self.model_dir = self._dir(report.MODEL_INPUT_DIR)
        self.test_dir = self._dir(report.TEST_INPUT_DIR)
        self.output_dir = self._dir(report.OUTPUT_DIR)
        self.archive = self.model_dir / report.MODEL_ARCHIVE
        self.message = base / "output" / "message"

    def _dir(self, container: str) -> Path:
        path = self.base / Path(container).relative_to("/opt/ml")
        path.mkdir(parents=True)
        return path

    def write_test_shards(self, x, y, shards: int = 2) -> list[Path]:
        names = write_shards(str(self.test_dir), "test", x, y, shards)
        return [self.test_dir / name for name in names]

    def report(self) -> dict:
        return json.loads((self.output_dir / report.REPORT_FILE).read_text())


@pytest.fixture
def ev(tmp_path, monkeypatch) -> EvalTree:
    monkeypatch.setenv(BASE_DIR_ENV, str(tmp_path / "ml"))
    return EvalTree(tmp_path / "ml")


# --- Image models: hand-built SavedModels exporting serving_bytes ----------------------------
# Three classes told apart by mean brightness: the model's probabilities are a softmax of
# -SHARPNESS x (mean - centre)^2, so a test can compute them (and every metric) by hand.
IMAGE_CLASSES = ("dark", "grey", "light")
BRIGHTNESS_CENTRES = (0.1, 0.5, 0.9)
SHARPNESS = 20.0


class BrightnessModel(tf.Module):
    def __init__(self):
        super().__init__()
        self.centres = tf.Variable(BRIGHTNESS_CENTRES, dtype=tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve_bytes(self, image_bytes):
        def mean(encoded):
            image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
            return tf.reduce_mean(tf.cast(image, tf.float32)) / 255.0

        means = tf.map_fn(mean, image_bytes, fn_output_signature=tf.float32)
        logits = -SHARPNESS * tf.square(means[:, None] - self.centres[None, :])
        return {"probabilities": tf.nn.softmax(logits)}


def brightness_probabilities(means: np.ndarray) -> np.ndarray:
    logits = -SHARPNESS * (means[:, None] - np.array(BRIGHTNESS_CENTRES)[None, :]) ** 2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture(scope="session")
def image_models(tmp_path_factory) -> dict[str, Path]:
    """name -> SavedModel dir: "brightness" exports serving_bytes; "wrong_output" names its
    output otherwise."""
    root = tmp_path_factory.mktemp("image_saved")
    model = BrightnessModel()
    tf.saved_model.save(model, str(root / "brightness"), signatures={"serving_bytes": model.serve_bytes})

    class Renamed(BrightnessModel):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve_scores(self, image_bytes):
            return {"scores": self.serve_bytes(image_bytes)["probabilities"]}

    renamed = Renamed()
    tf.saved_model.save(renamed, str(root / "wrong_output"), signatures={"serving_bytes": renamed.serve_scores})
    return {"brightness": root / "brightness", "wrong_output": root / "wrong_output"}


def solid_image(value: int, kind: str, size=(6, 5)) -> bytes:
    pixels = tf.fill([*size, 3], tf.constant(value, tf.uint8))
    return (tf.io.encode_png if kind == "png" else tf.io.encode_jpeg)(pixels).numpy()


def image_test_set(records: int = 40, seed: int = 0) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """(encoded images, labels, mean brightness): mostly near their class centre, some not
    (so the model is partly wrong), PNGs and JPEGs mixed."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(IMAGE_CLASSES), records)
    centres = np.array(BRIGHTNESS_CENTRES)[labels]
    values = np.clip(np.round((centres + rng.normal(0, 0.18, records)) * 255), 0, 255).astype(int)
    encoded = [solid_image(int(v), "png" if i % 3 else "jpeg") for i, v in enumerate(values)]
    means = np.array([float(tf.reduce_mean(tf.cast(tf.io.decode_image(e), tf.float32))) / 255 for e in encoded])
    return encoded, labels, means


def write_image_shards(directory: Path, encoded: list[bytes], labels: np.ndarray, shards: int = 2) -> None:
    from processing.split import shard_bounds
    from training_entry.input import examples, records

    for index, (start, stop) in enumerate(shard_bounds(len(labels), shards)):
        with tf.io.TFRecordWriter(str(directory / records.shard_name("test", index, shards))) as writer:
            for data, label in zip(encoded[start:stop], labels[start:stop], strict=True):
                height, width = tf.io.decode_image(data).shape[:2]
                writer.write(examples.serialize_image(data, int(label), IMAGE_CLASSES[label], height, width))
