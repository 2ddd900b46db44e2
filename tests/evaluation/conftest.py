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
