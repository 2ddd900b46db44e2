"""The evaluation container's contract with ``pipeline/``: paths and the report's shape.

``ACCURACY_JSON_PATH`` is what the condition step reads (``JsonGet`` on the PropertyFile) and
what ``build_report`` writes: one definition for both. Standard library only, Python 3.10.
"""

from __future__ import annotations

ENTRY_POINT = "evaluate.py"

# SageMaker: processing paths live under /opt/ml/processing/.
MODEL_INPUT_DIR = "/opt/ml/processing/input/model"  # holds model.tar.gz
TEST_INPUT_DIR = "/opt/ml/processing/input/test"  # holds the test TFRecord shards
OUTPUT_DIR = "/opt/ml/processing/output/evaluation"
OUTPUT_NAME = "evaluation"
REPORT_FILE = "evaluation.json"
PROPERTY_FILE_NAME = "EvaluationReport"
MODEL_ARCHIVE = "model.tar.gz"

ACCURACY_JSON_PATH = "metrics.accuracy.value"
LOSS_JSON_PATH = "metrics.loss.value"


def build_report(
    accuracy: float,
    loss: float,
    records: int,
    per_class: dict[str, dict[str, int]],
) -> dict:
    """The evaluation.json document; ``per_class`` maps label -> {"support", "correct"}."""
    report = {
        "metrics": {"accuracy": {"value": float(accuracy)}, "loss": {"value": float(loss)}},
        "records": int(records),
        "per_class": per_class,
    }
    assert read_json_path(report, ACCURACY_JSON_PATH) == float(accuracy)
    return report


def read_json_path(document: dict, path: str):
    """Follow a dotted path (the subset of JsonPath that Std:JsonGet uses here)."""
    value = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{path!r}: no {part!r} in the evaluation report")
        value = value[part]
    return value
