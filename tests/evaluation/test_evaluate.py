"""The EvaluateModel step: the report it writes, and each input it refuses."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from evaluation import report
from evaluation.evaluate import EvaluationError, check_probabilities, main
from tests import readme_record
from tests.evaluation.conftest import EvalTree, make_archive, scored_data
from training_entry.contract import BASE_DIR_ENV
from training_entry.input import records

REPO = Path(__file__).resolve().parents[2]


def expected_scores(saved: Path, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    probabilities = tf.keras.models.load_model(saved, compile=False).predict(x, verbose=0)
    accuracy = float(np.mean(np.argmax(probabilities, axis=1) == y))
    loss = float(tf.keras.losses.SparseCategoricalCrossentropy()(y, probabilities))
    return accuracy, loss


def test_report_matches_what_model_predict_gives(ev, saved_models):
    x, y = scored_data()
    ev.write_test_shards(x, y, shards=3)
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    assert main([]) == 0
    document = ev.report()
    accuracy, loss = expected_scores(saved_models["seeded"], x, y)
    assert 0 < accuracy < 1, "pick data the model gets partly right, or equality proves little"
    assert report.read_json_path(document, report.ACCURACY_JSON_PATH) == pytest.approx(accuracy, abs=1e-12)
    assert report.read_json_path(document, report.LOSS_JSON_PATH) == pytest.approx(loss, rel=1e-5)
    assert document["records"] == len(y)
    per_class = document["per_class"]
    assert list(per_class) == ["0", "1", "2"]
    assert [per_class[c]["support"] for c in per_class] == np.bincount(y, minlength=3).tolist()
    assert sum(c["correct"] for c in per_class.values()) == round(accuracy * len(y))
    assert os.listdir(ev.output_dir) == [report.REPORT_FILE]  # no partial file left behind


def test_small_batches_give_the_same_report(ev, saved_models):
    x, y = scored_data(records=25)
    ev.write_test_shards(x, y, shards=2)
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    assert main(["--batch-size", "4"]) == 0
    accuracy, loss = expected_scores(saved_models["seeded"], x, y)
    document = ev.report()
    assert document["metrics"]["accuracy"]["value"] == pytest.approx(accuracy, abs=1e-12)
    assert document["metrics"]["loss"]["value"] == pytest.approx(loss, rel=1e-5)


def test_the_highest_numbered_version_is_evaluated(ev, saved_models):
    x, y = scored_data()
    ev.write_test_shards(x, y)
    # "10" sorts before "9" as text: the choice must be numeric.
    make_archive(ev.archive, {"9": saved_models["seeded"], "10": saved_models["class_zero"]})
    assert main([]) == 0
    assert ev.report()["metrics"]["accuracy"]["value"] == pytest.approx(np.mean(y == 0))


def test_runs_as_the_container_runs_it(tmp_path, saved_models):
    tree = EvalTree(tmp_path / "ml")
    x, y = scored_data()
    tree.write_test_shards(x, y)
    make_archive(tree.archive, {"1": saved_models["seeded"]})
    env = {k: v for k, v in os.environ.items() if k != BASE_DIR_ENV}
    env.update({BASE_DIR_ENV: str(tree.base), "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
    done = subprocess.run(
        [sys.executable, "-m", "evaluation.evaluate"],  # SageMaker: no arguments
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert f"on {len(y)} test records from 2 shard(s): accuracy=" in done.stdout
    accuracy, _ = expected_scores(saved_models["seeded"], x, y)
    assert tree.report()["metrics"]["accuracy"]["value"] == pytest.approx(accuracy)
    assert not tree.message.exists()


# --- Refusals --------------------------------------------------------------------------------
def refused(ev: EvalTree, pattern: str) -> str:
    """Run the step, expect a failure whose one-line message matches ``pattern``."""
    assert main([]) == 1
    message = ev.message.read_text()
    readme_record.record(message)
    assert "\n" not in message and len(message.encode()) <= 1024
    assert __import__("re").search(pattern, message), message
    assert not (ev.output_dir / report.REPORT_FILE).exists()
    return message


def test_a_missing_archive_is_named(ev):
    ev.write_test_shards(*scored_data())
    refused(ev, r"model archive .*/processing/input/model/model\.tar\.gz is missing; the EvaluateModel step needs the training job's model\.tar\.gz")


def test_a_file_that_is_not_a_tar_gz_is_refused(ev):
    ev.archive.write_bytes(b"PK\x03\x04 a zip, not a tarball")
    refused(ev, r"model\.tar\.gz is not a readable tar\.gz archive \(.*\); the training job must produce model\.tar\.gz")


def test_a_truncated_archive_is_refused(ev, saved_models, tmp_path):
    whole = make_archive(tmp_path / "whole.tar.gz", {"1": saved_models["seeded"]}).read_bytes()
    ev.archive.write_bytes(whole[: len(whole) // 2])
    refused(ev, r"model\.tar\.gz is not a readable tar\.gz archive")


def test_an_archive_without_a_saved_model_is_refused(ev, saved_models):
    make_archive(ev.archive, {"model": saved_models["seeded"], "notes.txt": b"v1"})
    refused(
        ev,
        r"model\.tar\.gz is not a SavedModel: expected <model_dir>/1/saved_model\.pb \(a numbered version "
        r"directory at the archive root\) but it holds: model, notes\.txt; training must save with "
        r"model\.save\(os\.path\.join\(model_dir, '1'\)\)",
    )


@pytest.mark.parametrize("name", ["../escaped.txt", "1/../../escaped.txt", "/tmp/trainpipe-escaped.txt"])
def test_members_escaping_the_extraction_dir_are_refused(ev, tmp_path, name):
    make_archive(ev.archive, {"1/saved_model.pb": b"x", name: b"pwned"})
    refused(ev, rf"refusing to extract .*model\.tar\.gz: member '{name}' would be written outside the extraction directory")
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not Path("/tmp/trainpipe-escaped.txt").exists()


def test_links_pointing_out_of_the_extraction_dir_are_refused(ev):
    with tarfile.open(ev.archive, "w:gz") as tar:
        link = tarfile.TarInfo("1/variables")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
    refused(ev, r"refusing to extract .*: member '1/variables' is a symbolic link \(-> '/etc'\)")


def test_no_test_shards_is_refused(ev, saved_models):
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    (ev.test_dir / "_SUCCESS").write_text("")
    refused(ev, r"no test shards: .*/processing/input/test has no \*\.tfrecord file")


def test_a_corrupt_shard_is_named_with_the_bad_record_offset(ev, saved_models):
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    shard = ev.write_test_shards(*scored_data())[1]
    sizes = [len(p) + 16 for p in records.read_file_records(str(shard))]
    offset = sum(sizes[:3])  # the fourth record
    data = bytearray(shard.read_bytes())
    data[offset + 12 + 5] ^= 0xFF  # a byte of its payload
    shard.write_bytes(bytes(data))
    refused(ev, rf"^{shard}: corrupt record data \(CRC mismatch\) at byte offset {offset}; the test shard is corrupt or truncated: re-run the PreprocessData step$")


def test_a_truncated_shard_is_named_with_the_offset(ev, saved_models):
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    shard = ev.write_test_shards(*scored_data())[0]
    sizes = [len(p) + 16 for p in records.read_file_records(str(shard))]
    shard.write_bytes(shard.read_bytes()[:-5])
    refused(ev, rf"^{shard}: truncated record at byte offset {sum(sizes[:-1])} ")


def test_records_that_are_not_examples_are_refused(ev, saved_models):
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    records.write_records(str(ev.test_dir / "test-00000-of-00001.tfrecord"), [b"\xffnot a proto"] * 3)
    refused(ev, r"test-00000-of-00001\.tfrecord: the first record is not a trainpipe Example")


def test_data_of_another_width_is_refused(ev, saved_models):
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    x, y = scored_data()
    ev.write_test_shards(np.hstack([x, x[:, :1]]), y)
    refused(ev, r"the model takes 4 features but .*test-00000-of-00002\.tfrecord holds 5")


def test_labels_the_model_cannot_predict_are_refused(ev, saved_models):
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    x, y = scored_data()
    ev.write_test_shards(x, np.where(y == 2, 7, y))
    refused(ev, r"test-0000[01]-of-00002\.tfrecord holds label 7 but the model predicts 3 classes \(0\.\.2\)")


def test_logits_are_not_taken_for_probabilities():
    labels = np.array([0, 1])
    check_probabilities(np.array([[0.7, 0.3], [0.2, 0.8]], np.float32), labels, "s")
    with pytest.raises(EvaluationError, match="not probabilities .*end the model with a softmax"):
        check_probabilities(np.array([[2.0, -1.0], [0.5, 3.0]], np.float32), labels, "s")


def test_a_message_never_spans_lines(ev, monkeypatch):
    def fails(*args, **kwargs):
        raise RuntimeError("line one\nline two")

    monkeypatch.setattr("evaluation.evaluate.extract_archive", fails)
    assert main([]) == 1
    assert ev.message.read_text() == "unexpected error in evaluate: RuntimeError: line one line two"


def test_archive_member_bytes_are_checked_before_anything_is_extracted(ev, tmp_path):
    """The first member is fine, the second escapes: the first must not be extracted either."""
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz") as tar:
        for name in ("1/saved_model.pb", "../late.txt"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    ev.archive.write_bytes(payload.getvalue())
    refused(ev, r"member '\.\./late\.txt' would be written outside")
    assert not list(tmp_path.rglob("late.txt"))


def test_a_saved_model_that_is_not_keras_is_refused(ev, tmp_path):
    module = tf.Module()
    module.predict = tf.function(lambda x: tf.nn.softmax(x), input_signature=[tf.TensorSpec([None, 4])])
    tf.saved_model.save(module, str(tmp_path / "plain"))
    make_archive(ev.archive, {"1": tmp_path / "plain"})
    ev.write_test_shards(*scored_data())
    refused(ev, r"model\.tar\.gz: version 1 is a SavedModel but not a Keras model; save it with model\.save\(\)")


def test_an_unloadable_saved_model_is_refused(ev):
    make_archive(ev.archive, {"1/saved_model.pb": b"not a protocol buffer"})
    ev.write_test_shards(*scored_data())
    refused(ev, r"model\.tar\.gz: cannot load version 1 as a Keras model \(.+\); training must save a Keras model")


def test_evaluates_what_training_saves(ev, tmp_path):
    """The contract with training_entry: its model, saved its way, archived as SageMaker does."""
    model_lib = pytest.importorskip("training_entry.model.network")
    x, y = scored_data()
    model = model_lib.build_model(num_features=x.shape[1], num_classes=3)
    model_dir = tmp_path / "opt-ml-model"
    model_lib.save_for_serving(model, str(model_dir), "1")
    make_archive(ev.archive, {"1": model_dir / "1"})
    ev.write_test_shards(x, y)
    assert main([]) == 0
    probabilities = model.predict(x, verbose=0)
    assert ev.report()["metrics"]["accuracy"]["value"] == pytest.approx(
        np.mean(np.argmax(probabilities, axis=1) == y)
    )
