"""EvaluateModel: score the trained model on the test shards and write evaluation.json.

How the pipeline runs it (SageMaker Processing, the TF 2.14 py310 image; no arguments)::

    PYTHONPATH=/opt/ml/processing/input/code python3 -m evaluation.evaluate

and locally, with the /opt/ml tree moved::

    SAGEMAKER_BASE_DIR=/tmp/ml python -m evaluation.evaluate

Inputs: the training job's model.tar.gz in MODEL_INPUT_DIR (a Keras SavedModel under a
numbered version directory, ``1/saved_model.pb``) and the test TFRecord shards in
TEST_INPUT_DIR. Output: ``report.build_report(...)`` as OUTPUT_DIR/evaluation.json, whose
``report.ACCURACY_JSON_PATH`` the condition step reads, with per-class precision/recall/F1, the
confusion matrix and top-k accuracy. Image shards (``records.FEATURE_IMAGE``) are scored
through the model's ``serving_bytes`` signature (``evaluation.images``), and the most
confident mistakes are saved as OUTPUT_DIR/misclassified/*.{png,jpg}. Any failure is one line
in /opt/ml/output/message and a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import tempfile
import time
import traceback
import zlib

import numpy as np
import tensorflow as tf

from evaluation import images, report, tables, tracking
from evaluation.metrics import Scores
from training_entry import archives
from training_entry.contract import container_path
from training_entry.failure import report_exit_message
from training_entry.input import records
from training_entry.input.examples import parse_batch

SAVED_MODEL_FILE = "saved_model.pb"
DEFAULT_BATCH_SIZE = 1024
# A softmax row sums to 1 up to float32 rounding; logits or sigmoids do not.
PROBABILITY_TOLERANCE = 1e-3


class EvaluationError(Exception):
    """An input the step cannot evaluate; the message says which and what to do."""


# --- The model -------------------------------------------------------------------------------
def extract_archive(archive: str, destination: str) -> None:
    """Extract ``archive`` (tar.gz) into ``destination``, refusing any member that would land
    outside it (absolute paths, ``..``, links pointing out) or is a device."""
    if not os.path.isfile(archive):
        raise EvaluationError(
            f"model archive {archive} is missing; the EvaluateModel step needs the training "
            f"job's {report.MODEL_ARCHIVE} (check the TrainModel step's ModelArtifacts)"
        )
    try:
        archives.extract(archive, destination)
    except archives.UnsafeArchiveError as e:
        raise EvaluationError(str(e)) from None
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise EvaluationError(
            f"{archive} is not a readable tar.gz archive ({_first_line(e)}); the training job "
            f"must produce {report.MODEL_ARCHIVE} (SageMaker tars /opt/ml/model)"
        ) from None


def find_saved_model(root: str, archive: str) -> str:
    """The highest numbered version directory holding a SavedModel (TF Serving's layout)."""
    versions = [
        int(name)
        for name in os.listdir(root)
        if name.isdigit() and os.path.isfile(os.path.join(root, name, SAVED_MODEL_FILE))
    ]
    if not versions:
        found = ", ".join(sorted(os.listdir(root))[:10]) or "nothing"
        raise EvaluationError(
            f"{archive} is not a SavedModel: expected <model_dir>/1/{SAVED_MODEL_FILE} (a "
            f"numbered version directory at the archive root) but it holds: {found}; training "
            f"must save with model.save(os.path.join(model_dir, '1'))"
        )
    return os.path.join(root, str(max(versions)))


def load_model(version_dir: str, archive: str) -> tf.keras.Model:
    version = os.path.basename(version_dir)  # named by the archive, not the temp dir
    try:
        # compile=False: only the forward pass is needed, and the training optimizer (e.g.
        # Horovod's DistributedOptimizer) may not deserialize without Horovod installed.
        model = tf.keras.models.load_model(version_dir, compile=False)
    except Exception as e:  # Keras raises many types for an unloadable SavedModel
        raise EvaluationError(
            f"{archive}: cannot load version {version} as a Keras model "
            f"({type(e).__name__}: {_first_line(e)}); "
            f"training must save a Keras model with model.save(<model_dir>/1)"
        ) from None
    if not hasattr(model, "predict_on_batch"):
        raise EvaluationError(
            f"{archive}: version {version} is a SavedModel but not a Keras model; save it with model.save(), "
            f"not tf.saved_model.save()"
        )
    return model


# --- The test data ---------------------------------------------------------------------------
def list_test_shards(directory: str) -> list[str]:
    shards = (
        sorted(
            os.path.join(directory, name)
            for name in os.listdir(directory)
            if name.endswith(records.SHARD_SUFFIX)
        )
        if os.path.isdir(directory)
        else []
    )
    if not shards:
        raise EvaluationError(
            f"no test shards: {directory} has no *{records.SHARD_SUFFIX} file; the "
            f"PreprocessData step's 'test' output should be wired to this input"
        )
    return shards


def record_kind(shard: str) -> str:
    """``records.KIND_IMAGE`` or ``KIND_TABLE`` from the first record of ``shard`` (the step
    has no manifest input); a shard with no records reads as a table (``score`` refuses it)."""
    try:
        payload = next(records.read_file_records(shard), None)
    except records.RecordError as e:
        raise EvaluationError(f"{e}; the test shard is corrupt or truncated: re-run the PreprocessData step") from None
    if payload is None:
        return records.KIND_TABLE
    try:
        feature = tf.train.Example.FromString(payload).features.feature
    except Exception as e:  # protobuf's DecodeError is not a stable import path
        raise EvaluationError(
            f"{shard}: the first record is not a trainpipe Example ({_first_line(e)}); "
            f"test shards must come from the PreprocessData step"
        ) from None
    return records.KIND_IMAGE if records.FEATURE_IMAGE in feature else records.KIND_TABLE


def features_in(payload: bytes, shard: str) -> int:
    """num_features from one serialized Example (the step has no manifest input)."""
    try:
        example = tf.train.Example.FromString(payload)
        feature = example.features.feature
        if records.FEATURE_X not in feature or records.FEATURE_Y not in feature:
            raise ValueError(f"no '{records.FEATURE_X}'/'{records.FEATURE_Y}' features")
        return len(feature[records.FEATURE_X].float_list.value)
    except Exception as e:  # protobuf's DecodeError is not a stable import path
        raise EvaluationError(
            f"{shard}: the first record is not a trainpipe Example ({_first_line(e)}); "
            f"test shards must come from the PreprocessData step"
        ) from None


def batches(shards: list[str], batch_size: int):
    """(shard, first record index, payloads) per batch, each shard's records CRC-checked.

    Read with ``records`` rather than tf.data: TFRecordDataset silently drops a truncated
    final record and does not report the record's byte offset; this reader does both."""
    for shard in shards:
        batch, first = [], 0
        try:
            for index, payload in enumerate(records.read_file_records(shard)):
                batch.append(payload)
                if len(batch) == batch_size:
                    yield shard, first, batch
                    batch, first = [], index + 1
        except records.RecordError as e:
            raise EvaluationError(
                f"{e}; the test shard is corrupt or truncated: re-run the PreprocessData step"
            ) from None
        if batch:
            yield shard, first, batch


# --- Scoring ---------------------------------------------------------------------------------
def score(model: tf.keras.Model, shards: list[str], batch_size: int) -> Scores:
    scores = Scores()
    num_features = None
    for shard, first, batch in batches(shards, batch_size):
        if num_features is None:
            num_features = features_in(batch[0], shard)
            check_model_input(model, num_features, shard)
        try:
            x, y = parse_batch(tf.constant(batch), num_features)
        except tf.errors.InvalidArgumentError as e:
            raise EvaluationError(
                f"{shard}: records {first}..{first + len(batch) - 1} do not parse as Examples "
                f"with {num_features} features like the first one ({_first_line(e.message)})"
            ) from None
        probabilities = np.asarray(model.predict_on_batch(x))
        labels = y.numpy()
        check_probabilities(probabilities, labels, shard)
        scores.add(labels, probabilities)
    if scores.records == 0:
        raise EvaluationError(
            f"the test shards ({', '.join(os.path.basename(s) for s in shards[:5])}) hold no "
            f"records; re-run PreprocessData"
        )
    return scores


def check_model_input(model: tf.keras.Model, num_features: int, shard: str) -> None:
    shape = getattr(model, "input_shape", None)
    if isinstance(shape, tuple) and len(shape) == 2 and shape[-1] not in (None, num_features):
        raise EvaluationError(
            f"the model takes {shape[-1]} features but {shard} holds {num_features}; evaluate "
            f"with the test split of the data this model was trained on"
        )


def check_probabilities(probabilities: np.ndarray, labels: np.ndarray, shard: str) -> None:
    if probabilities.ndim != 2 or probabilities.shape[1] < 2:
        raise EvaluationError(
            f"the model outputs shape {probabilities.shape}; expected [batch, classes] class "
            f"probabilities (a softmax layer with one unit per class)"
        )
    sums = probabilities.sum(axis=1)
    if (probabilities < 0).any() or np.abs(sums - 1.0).max() > PROBABILITY_TOLERANCE:
        raise EvaluationError(
            f"the model's outputs are not probabilities (a row sums to "
            f"{sums[np.argmax(np.abs(sums - 1.0))]:.4g}); end the model with a softmax layer"
        )
    outside = (labels < 0) | (labels >= probabilities.shape[1])
    if outside.any():
        raise EvaluationError(
            f"{shard} holds label {labels[outside][0]} but the model predicts "
            f"{probabilities.shape[1]} classes (0..{probabilities.shape[1] - 1}); evaluate with "
            f"the test split of the data this model was trained on"
        )


# --- Output ----------------------------------------------------------------------------------
def write_report(document: dict, directory: str) -> str:
    """Write evaluation.json atomically: the condition step never reads half a report."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, report.REPORT_FILE)
    partial = f"{path}.partial"
    with open(partial, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    os.replace(partial, path)
    return path


def _first_line(error: BaseException | str) -> str:
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# --- The step --------------------------------------------------------------------------------
def manifest_class_names(directory: str) -> tuple[str, ...] | None:
    """The class names of the test manifest, when the step has the manifest input."""
    path = os.path.join(directory, records.manifest_name("test"))
    if not os.path.isfile(path):
        return None
    try:
        return records.Manifest.load(path).class_names
    except ValueError as e:
        raise EvaluationError(f"{_first_line(e)}") from None


def _typed(shard: str) -> bool:
    payload = next(records.read_file_records(shard), None)
    return payload is not None and tables.is_typed(payload)


def score_typed_model(
    version_dir: str, archive: str, shards: list[str], batch_size: int, class_names: tuple[str, ...] | None
) -> dict:
    """A table of typed columns, scored through ``serving_default`` (``evaluation.tables``)."""
    try:
        function, _ = tables.load_columns_signature(version_dir, archive)
        scores = Scores()
        for shard, first, batch in batches(shards, batch_size):
            try:
                probabilities, labels = function(batch)
            except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
                raise EvaluationError(
                    f"{shard}: records {first}..{first + len(batch) - 1} do not match the model's inputs "
                    f"({_first_line(getattr(e, 'message', e))}); evaluate with the test split of the "
                    f"data this model was trained on"
                ) from None
            check_probabilities(probabilities, labels, shard)
            scores.add(labels, probabilities)
    except tables.TableModelError as e:
        raise EvaluationError(str(e)) from None
    if scores.records == 0:
        raise EvaluationError(f"the test shards ({', '.join(os.path.basename(s) for s in shards[:5])}) hold no "
                              f"records; re-run PreprocessData")
    return scores.to_report(class_names=list(class_names) if class_names else None)


def score_image_model(
    version_dir: str, archive: str, shards: list[str], batch_size: int, output_dir: str,
    known_names: tuple[str, ...] | None = None,
) -> dict:
    """The image path: score through ``serving_bytes``, save the most confident mistakes
    under ``output_dir``; returns the report."""
    try:
        function = images.load_bytes_signature(version_dir, archive)
        scores, class_names, mistakes = images.score_images(
            function, batches(shards, batch_size), check_probabilities
        )
    except images.ImageModelError as e:
        raise EvaluationError(str(e)) from None
    if scores.records == 0:
        raise EvaluationError(
            f"the test shards ({', '.join(os.path.basename(s) for s in shards[:5])}) hold no "
            f"records; re-run PreprocessData"
        )
    if known_names and len(known_names) == scores.confusion.shape[0]:
        class_names = list(known_names)  # a class the test split lacks keeps its name (support 0)
    saved = images.save_mistakes(mistakes, class_names, output_dir)
    return scores.to_report(report.KIND_IMAGE, class_names, saved)


def evaluate(batch_size: int | None = None) -> dict:
    started = time.perf_counter()
    archive = os.path.join(container_path(report.MODEL_INPUT_DIR), report.MODEL_ARCHIVE)
    output_dir = container_path(report.OUTPUT_DIR)
    with tempfile.TemporaryDirectory(prefix="trainpipe-model-") as extracted:
        extract_archive(archive, extracted)
        version_dir = find_saved_model(extracted, archive)
        shards = list_test_shards(container_path(report.TEST_INPUT_DIR))  # before the slow load
        class_names = manifest_class_names(container_path(report.MANIFEST_INPUT_DIR))
        if record_kind(shards[0]) == records.KIND_IMAGE:
            document = score_image_model(
                version_dir, archive, shards, batch_size or images.DEFAULT_IMAGE_BATCH_SIZE, output_dir,
                class_names,
            )
        elif _typed(shards[0]):
            document = score_typed_model(version_dir, archive, shards, batch_size or DEFAULT_BATCH_SIZE, class_names)
        else:
            model = load_model(version_dir, archive)
            document = score(model, shards, batch_size or DEFAULT_BATCH_SIZE).to_report(
                class_names=list(class_names) if class_names else None)
    path = write_report(document, output_dir)
    top_k = document["metrics"]["top_k_accuracy"]
    print(
        f"evaluate: model version {os.path.basename(version_dir)} on {document['records']} test "
        f"{'images' if document['kind'] == report.KIND_IMAGE else 'records'} from {len(shards)} shard(s): "
        f"accuracy={report.read_json_path(document, report.ACCURACY_JSON_PATH):.4f} "
        f"top-{top_k['k']}={top_k['value']:.4f} "
        f"loss={report.read_json_path(document, report.LOSS_JSON_PATH):.4f} -> {path} "
        f"in {time.perf_counter() - started:.2f}s",
        flush=True,
    )
    return document


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evaluation.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"records scored per model call (memory, not results); default "
                             f"{DEFAULT_BATCH_SIZE} for tables, {images.DEFAULT_IMAGE_BATCH_SIZE} for images")
    args = parser.parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        parser.error(f"--batch-size {args.batch_size} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2, already printed)
        if e.code:
            report_exit_message("evaluate", "bad arguments; usage: python -m evaluation.evaluate [--batch-size N]")
        return int(e.code or 0)
    try:
        document = evaluate(args.batch_size)
    except EvaluationError as e:
        report_exit_message("evaluate", str(e))
        return 1
    except Exception as e:
        traceback.print_exc()
        report_exit_message("evaluate", f"unexpected error in evaluate: {type(e).__name__}: {e}")
        return 1
    # MLflow, on SageMaker with `definition --tracking-uri`: never fails the evaluation.
    tracking.log_evaluation(document, container_path(report.OUTPUT_DIR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
