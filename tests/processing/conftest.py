"""A processing container's /opt/ml tree in a temp dir, and small raw data sets to put in it."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from processing import contract
from processing.preprocess import main
from training_entry.contract import BASE_DIR_ENV
from training_entry.input import records


def labelled_data(per_class=(40, 35, 25), features=4, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Records sorted by label, as raw exports often are (so a missing shuffle shows)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(per_class)), per_class)
    x = rng.normal(size=(len(y), features)) + y[:, None]
    return x, y


class MlTree:
    """One host's /opt/ml, as the platform leaves it before the entrypoint starts."""

    def __init__(self, base: Path):
        self.base = base
        self.raw_dir = base / "processing" / "input" / "data"
        self.raw_dir.mkdir(parents=True)
        self.outputs = {
            name: base / Path(path).relative_to("/opt/ml") for name, path in contract.OUTPUT_DIRS.items()
        }
        for directory in self.outputs.values():
            directory.mkdir(parents=True)
        self.message = base / "output" / "message"

    def write_csv(self, x, y, name="data.csv", header=None) -> Path:
        path = self.raw_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header or [f"f{i}" for i in range(np.shape(x)[1])] + ["label"])
            for features, label in zip(x, y, strict=True):
                writer.writerow([repr(float(v)) for v in features] + [label])
        return path

    def write_npz(self, x, y, name="data.npz") -> Path:
        path = self.raw_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, x=x, y=y)
        return path

    def set_hosts(self, current: int, count: int) -> None:
        config = self.base / "config" / "resourceconfig.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        hosts = sorted(f"algo-{i + 1}" for i in range(count))
        config.write_text(json.dumps({"current_host": f"algo-{current + 1}", "hosts": hosts}))

    def output_files(self) -> dict[str, bytes]:
        """Relative path -> bytes of everything under the output dirs."""
        root = self.base / "processing" / "output"
        return {
            p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
        }

    def leftovers(self) -> list[str]:
        """Anything in the output tree that is not an (empty) output dir: files, staging dirs."""
        root = self.base / "processing" / "output"
        expected = set(self.outputs.values())
        return sorted(str(p) for p in root.rglob("*") if p not in expected)

    def manifest(self, split: str) -> records.Manifest:
        return records.Manifest.load(str(self.outputs["manifest"] / records.manifest_name(split)))

    def read_split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Every record of a split, shard after shard, as (x, y)."""
        xs, ys = [], []
        for shard in sorted((self.outputs[split]).glob("*.tfrecord")):
            for payload in records.read_file_records(str(shard)):
                feature = tf.train.Example.FromString(payload).features.feature
                xs.append(list(feature[records.FEATURE_X].float_list.value))
                ys.append(feature[records.FEATURE_Y].int64_list.value[0])
        return np.array(xs, dtype=np.float32), np.array(ys, dtype=np.int64)


@pytest.fixture
def ml(tmp_path, monkeypatch) -> MlTree:
    monkeypatch.setenv(BASE_DIR_ENV, str(tmp_path / "ml"))
    return MlTree(tmp_path / "ml")


def run_preprocess(tree: MlTree, monkeypatch, *args: str) -> int:
    """main() with ``tree`` as /opt/ml (several trees in one test: one per simulated host)."""
    monkeypatch.setenv(BASE_DIR_ENV, str(tree.base))
    return main([str(a) for a in args])


def shard_record_counts(directory: Path) -> dict[str, int]:
    return {
        p.name: sum(1 for _ in records.read_file_records(str(p)))
        for p in sorted(directory.glob("*.tfrecord"))
    }


def list_dir(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# --- Image trees -----------------------------------------------------------------------------
def image_bytes(label: int, index: int, kind: str = "png", size: tuple[int, int] = (12, 10)) -> bytes:
    """A small image whose pixels depend on its class and index (so every file differs)."""
    rng = np.random.default_rng(label * 100_003 + index)
    pixels = rng.integers(0, 256, size=(*size, 3), dtype=np.uint8)
    encode = tf.io.encode_png if kind == "png" else tf.io.encode_jpeg
    return encode(tf.constant(pixels)).numpy()


def write_image_tree(raw_dir: Path, per_class: dict[str, int], kind: str = "png") -> dict[str, bytes]:
    """``<class>/<class>-<i>.<kind>`` files; returns relative path -> bytes written."""
    written = {}
    for label, (name, count) in enumerate(sorted(per_class.items())):
        folder = raw_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            # Alternate sizes: the tree holds images of any size.
            data = image_bytes(label, i, kind, (12, 10) if i % 2 else (9, 15))
            relative = f"{name}/{name}-{i:03d}.{'jpg' if kind == 'jpeg' else kind}"
            (raw_dir / relative).write_bytes(data)
            written[relative] = data
    return written


def read_image_split(directory: Path) -> list[dict]:
    """Every image record of a split's shards, shard after shard."""
    out = []
    for shard in sorted(directory.glob("*.tfrecord")):
        for payload in records.read_file_records(str(shard)):
            feature = tf.train.Example.FromString(payload).features.feature
            out.append({
                "image": feature[records.FEATURE_IMAGE].bytes_list.value[0],
                "label": feature[records.FEATURE_Y].int64_list.value[0],
                "class_name": feature[records.FEATURE_CLASS_NAME].bytes_list.value[0].decode(),
                "height": feature[records.FEATURE_HEIGHT].int64_list.value[0],
                "width": feature[records.FEATURE_WIDTH].int64_list.value[0],
            })
    return out
