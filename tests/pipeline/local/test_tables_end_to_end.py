"""End to end with `trainpipe run --local`, 2 hosts, on data laid out as it is published:
a mixed-type CSV (string labels in its first column, 5% gaps, a categorical column carrying
the signal) and an image tree with train/ and val/ split folders. Slow:

    .venv/bin/pytest tests/pipeline/local/test_tables_end_to_end.py -m slow
"""

from __future__ import annotations

import glob
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest

from pipeline.local.hosts import mpi
from pipeline.local.store.registry import Registry
from tests.processing import mixed_table
from training_entry.contract import SIGNATURE_DEFAULT

from .test_end_to_end import FAST, assert_registered, execution, steps, trainpipe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed"),
]
TWO_HOSTS = ["-p", "TrainingInstanceCount=2", "-p", "ProcessesPerHost=1"]
# Rows as a CSV gives them, label left out, gaps in three spellings (empty, NA, ?).
RAW_LINES = ["island-05,NA,4100,,201", "island-03,41.0,?,female,NA", "island-07,50.2,3900,male,190"]


def evaluation(workdir: Path) -> dict:
    (path,) = glob.glob(str(workdir / "store" / "**" / "evaluation.json"), recursive=True)
    return json.loads(Path(path).read_text())


def answer_raw_csv_lines(workdir: Path):
    """The run's exported model, and its CSV signature's answer to raw rows with gaps, whose
    classes are checked here: (loaded SavedModel, answer)."""
    import tensorflow as tf

    from training_entry import contract
    from training_entry.model import tabular

    train = steps(execution(workdir))["TrainModel"]
    archive = workdir / "store" / train["properties"]["ModelArtifacts"]["S3ModelArtifacts"][5:]
    with tarfile.open(archive) as tar:
        tar.extractall(workdir / "model")
    loaded = tf.saved_model.load(str(workdir / "model" / contract.MODEL_VERSION))
    answer = loaded.signatures[tabular.SIGNATURE_CSV](csv_lines=tf.constant(RAW_LINES))
    assert [c.decode() for c in answer["classes"].numpy()] == ["Gentoo", "Adelie", "Chinstrap"]
    return loaded, answer


def test_a_mixed_csv_with_string_labels_first_registers_and_answers_a_raw_csv_line(tmp_path):
    mixed_table.write(tmp_path / "store" / "bkt" / "penguins" / "penguins.csv", 3000)
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), *FAST, *TWO_HOSTS,
                       "-p", "InputDataUri=s3://bkt/penguins/", "-p", "LabelColumn=species")
    assert_registered(result, tmp_path)
    report = evaluation(tmp_path)
    assert report["metrics"]["accuracy"]["value"] >= 0.9
    assert [c["class_name"] for c in report["per_class"].values()] == list(mixed_table.SPECIES)
    package = Registry(tmp_path / "registry.sqlite").list()[-1]
    # The exported model takes raw CSV lines (gaps and all) and answers with class names.
    import tensorflow as tf

    loaded, answer = answer_raw_csv_lines(tmp_path)
    assert np.allclose(answer["probabilities"].numpy().sum(axis=1), 1.0, atol=1e-5)
    columns = loaded.signatures[SIGNATURE_DEFAULT](
        island=tf.constant(["island-05"]), bill_length_mm=tf.constant([np.nan], tf.float32),
        body_mass_g=tf.constant([4100.0]), sex=tf.constant([""]), flipper_mm=tf.constant([201.0]))
    assert columns["classes"].numpy()[0] == b"Gentoo"
    assert package.metrics["class_names"] == list(mixed_table.SPECIES)
    metadata = package.request["CustomerMetadataProperties"]["class_names"]
    assert json.loads(metadata) == list(mixed_table.SPECIES)


def test_without_the_categorical_column_the_same_rows_stay_at_chance(tmp_path):
    source = mixed_table.rows(3000)
    path = tmp_path / "store" / "bkt" / "numeric" / "penguins.csv"
    path.parent.mkdir(parents=True)
    keep = [0, 2, 3, 5]  # species and the numeric columns: no island, no sex
    path.write_text("\n".join(",".join(r[i] for i in keep) for r in [list(mixed_table.HEADER), *source]) + "\n")
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), *FAST, *TWO_HOSTS,
                       "-p", "InputDataUri=s3://bkt/numeric/", "-p", "LabelColumn=species")
    assert result.returncode != 0  # the gate fails it
    assert evaluation(tmp_path)["metrics"]["accuracy"]["value"] < 0.45  # chance is 1/3


def write_split_tree(root: Path) -> None:
    """train/ and val/ of two classes, dark and bright noise images (no test/: it is carved)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for split, count in (("train", 60), ("val", 12)):
        for label, name in enumerate(("ants", "bees")):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 64, size=(16, 16, 3), dtype=np.uint8) + 160 * label
                folder.joinpath(f"{i:03d}.png").write_bytes(tf.io.encode_png(pixels.astype(np.uint8)).numpy())


def test_an_image_tree_with_train_and_val_folders_is_evaluated_by_class_name(tmp_path):
    write_split_tree(tmp_path / "store" / "bkt" / "hymenoptera")
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), *TWO_HOSTS,
                       "-p", "InputDataUri=s3://bkt/hymenoptera/", "-p", "ModelArchitecture=small_cnn",
                       "-p", "ImageSize=32", "-p", "Epochs=3", "-p", "WarmupEpochs=0", "-p", "BatchSize=8",
                       timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = evaluation(tmp_path)
    assert report["class_names"] == ["ants", "bees"]
    assert [c["class_name"] for c in report["per_class"].values()] == ["ants", "bees"]
    preprocess = steps(execution(tmp_path))["PreprocessData"]
    log = (Path(preprocess["job_dir"]) / "job.log").read_text()
    assert "splits given: train, validation; carved from train (seeded, stratified): test" in log
    assert os.path.isdir(tmp_path / "store")
