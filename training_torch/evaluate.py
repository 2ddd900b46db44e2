"""EvaluateModel with ``-p Framework=pytorch``: the TorchScript model on the test shards ->
evaluation.json, the same report the TensorFlow evaluation writes (``evaluation.report`` and
``evaluation.metrics``, which import no TensorFlow), so the condition step and the registry read
it unchanged.

How the pipeline runs it (SageMaker Processing on AWS's PyTorch training image)::

    PYTHONPATH=/opt/ml/processing/input/code python3 -m training_torch.evaluate

Inputs: the training job's model.tar.gz (``model.pt`` and ``metadata.json``, ``export.py``), the
test shards and the test manifest. Any failure is one line in /opt/ml/output/message and a
non-zero exit."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

from evaluation import report
from evaluation.metrics import Scores
from training_entry import archives
from training_entry.contract import TORCH_METADATA_FILE, TORCH_MODEL_FILE, container_path
from training_entry.failure import report_exit_message
from training_entry.input import records
from training_torch import data, export

BATCH_SIZE = 256


class EvaluationError(Exception):
    """An input the step cannot evaluate; the message says which and what to do."""


def load_model(archive: str, extracted: str):
    if not os.path.isfile(archive):
        raise EvaluationError(f"model archive {archive} is missing; the EvaluateModel step needs the training "
                              f"job's {report.MODEL_ARCHIVE}")
    try:
        archives.extract(archive, extracted)
    except (archives.UnsafeArchiveError, OSError, EOFError) as e:
        raise EvaluationError(f"{archive}: {e}") from None
    missing = [n for n in (TORCH_MODEL_FILE, TORCH_METADATA_FILE) if not os.path.isfile(os.path.join(extracted, n))]
    if missing:
        raise EvaluationError(f"{archive} holds no {' or '.join(missing)}: it is not a model of trainpipe's PyTorch "
                              f"room (training_torch/export.py writes both); was it trained with -p Framework=pytorch?")
    return export.load(extracted)


def score(model, metadata: dict, shards: list[str]) -> Scores:
    split = data.load(shards, metadata["kind"], int(metadata.get("image_size") or 0))
    scores = Scores()
    model.eval()
    with torch.no_grad():
        for start in range(0, len(split.y), BATCH_SIZE):
            probabilities = torch.softmax(model(split.x[start:start + BATCH_SIZE]), dim=1).numpy()
            labels = split.y[start:start + BATCH_SIZE].numpy()
            if (labels >= probabilities.shape[1]).any():
                raise EvaluationError(f"the test split holds label {int(labels.max())} but the model predicts "
                                      f"{probabilities.shape[1]} classes; evaluate with the test split of the "
                                      "data this model was trained on")
            scores.add(labels, probabilities.astype(np.float64))
    return scores


def write_report(document: dict, directory: str) -> str:
    """evaluation.json, atomically: the condition step never reads half a report."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, report.REPORT_FILE)
    with open(f"{path}.partial", "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    os.replace(f"{path}.partial", path)
    return path


def evaluate() -> dict:
    started = time.perf_counter()
    archive = os.path.join(container_path(report.MODEL_INPUT_DIR), report.MODEL_ARCHIVE)
    test_dir = container_path(report.TEST_INPUT_DIR)
    with tempfile.TemporaryDirectory(prefix="trainpipe-model-") as extracted:
        model, metadata = load_model(archive, extracted)
        shards = [os.path.join(test_dir, n) for n in data.channel_shards(test_dir)] if os.path.isdir(test_dir) else []
        if not shards:
            raise EvaluationError(f"no test shards under {test_dir}; the PreprocessData step's 'test' output "
                                  "should be wired to this input")
        scores = score(model, metadata, shards)
    if scores.records == 0:
        raise EvaluationError("the test shards hold no records; re-run PreprocessData")
    manifest = os.path.join(container_path(report.MANIFEST_INPUT_DIR), records.manifest_name("test"))
    names = records.Manifest.load(manifest).class_names if os.path.isfile(manifest) else None
    names = list(names or metadata.get("class_names") or []) or None
    document = scores.to_report(metadata["kind"], names, [])
    path = write_report(document, container_path(report.OUTPUT_DIR))
    print(f"evaluate (pytorch): {document['records']} test records from {len(shards)} shard(s): "
          f"accuracy={report.read_json_path(document, report.ACCURACY_JSON_PATH):.4f} "
          f"loss={report.read_json_path(document, report.LOSS_JSON_PATH):.4f} -> {path} "
          f"in {time.perf_counter() - started:.2f}s", flush=True)
    return document


def main() -> int:
    try:
        evaluate()
    except (EvaluationError, FileNotFoundError, ValueError) as e:
        report_exit_message("evaluate", str(e))
        return 1
    except Exception as e:
        traceback.print_exc()
        report_exit_message("evaluate", f"unexpected error in evaluate: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
