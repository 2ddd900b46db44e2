"""The evaluation container's contract with ``pipeline/``: paths and the report's shape.

``ACCURACY_JSON_PATH`` is what the condition step reads (``JsonGet`` on the PropertyFile) and
what ``build_report`` writes: one definition for both. Standard library only, Python 3.10.
"""

from __future__ import annotations

# The report's "kind" is the data's kind, as the manifests name it (stdlib-only module).
from training_entry.input.records import KIND_IMAGE, KIND_TABLE  # noqa: F401  (re-exported)

ENTRY_POINT = "evaluate.py"

# SageMaker: processing paths live under /opt/ml/processing/.
MODEL_INPUT_DIR = "/opt/ml/processing/input/model"  # holds model.tar.gz
TEST_INPUT_DIR = "/opt/ml/processing/input/test"  # holds the test TFRecord shards
# The PreprocessData step's manifests (test.json): the class names, every class even one the
# test split lacks (reported with support 0). Optional: without it, names come from the records.
MANIFEST_INPUT_DIR = "/opt/ml/processing/input/manifest"
OUTPUT_DIR = "/opt/ml/processing/output/evaluation"
OUTPUT_NAME = "evaluation"
REPORT_FILE = "evaluation.json"
PROPERTY_FILE_NAME = "EvaluationReport"
MODEL_ARCHIVE = "model.tar.gz"

ACCURACY_JSON_PATH = "metrics.accuracy.value"
KIND_JSON_PATH = "kind"  # KIND_TABLE or KIND_IMAGE: what the batch-inference condition reads
LOSS_JSON_PATH = "metrics.loss.value"
TOP_K_JSON_PATH = "metrics.top_k_accuracy.value"  # with "k" beside "value"
# The class names as one string (a JSON list, at most METADATA_VALUE_CHARS characters): what
# RegisterModel puts in the model package's CustomerMetadataProperties (string values only).
CLASS_NAMES_JSON_PATH = "class_names_metadata"
METADATA_KEY_CLASS_NAMES = "class_names"
METADATA_VALUE_CHARS = 256
# Top-k accuracy uses k = min(TOP_K, classes - 1): with k = classes it would always be 1.
TOP_K = 5

# Images: the test images the model got wrong with the highest confidence, saved as they were
# (encoded bytes) under OUTPUT_DIR/MISCLASSIFIED_DIR and listed in the report's "misclassified".
MISCLASSIFIED_DIR = "misclassified"
MISCLASSIFIED_KEPT = 32


def build_report(
    accuracy: float,
    loss: float,
    records: int,
    per_class: dict[str, dict],
    *,
    kind: str = KIND_TABLE,
    top_k: tuple[int, float] | None = None,
    confusion_matrix: list[list[int]] | None = None,
    class_names: list[str] | None = None,
    misclassified: list[dict] | None = None,
) -> dict:
    """The evaluation.json document.

    ``per_class`` maps label -> {"support", "correct"} (and, from ``evaluate``, "precision",
    "recall", "f1", and for images "class_name"); ``top_k`` is (k, accuracy);
    ``confusion_matrix[true][predicted]`` counts test records; ``misclassified`` lists the
    saved images (file relative to the report, label, predicted, confidence, ...).
    """
    metrics = {"accuracy": {"value": float(accuracy)}, "loss": {"value": float(loss)}}
    if top_k is not None:
        metrics["top_k_accuracy"] = {"k": int(top_k[0]), "value": float(top_k[1])}
    report = {"kind": kind, "metrics": metrics, "records": int(records), "per_class": per_class}
    if class_names is not None:
        report["class_names"] = list(class_names)
    names = list(class_names) if class_names is not None else [str(i) for i in range(len(per_class))]
    report[CLASS_NAMES_JSON_PATH] = class_names_metadata(names)
    if confusion_matrix is not None:
        report["confusion_matrix"] = [[int(v) for v in row] for row in confusion_matrix]
    if misclassified is not None:
        report["misclassified"] = misclassified
    assert read_json_path(report, ACCURACY_JSON_PATH) == float(accuracy)
    assert read_json_path(report, KIND_JSON_PATH) == kind
    return report


def class_names_metadata(names: list[str]) -> str:
    """``names`` as a JSON list of at most METADATA_VALUE_CHARS characters: the names that fit,
    then "... N more" for the rest."""
    import json

    text = json.dumps(names, ensure_ascii=False)
    shown = len(names)
    while len(text) > METADATA_VALUE_CHARS and shown > 0:
        shown -= 1
        text = json.dumps(names[:shown] + [f"... {len(names) - shown} more"], ensure_ascii=False)
    return text


def read_json_path(document: dict, path: str):
    """Follow a dotted path (the subset of JsonPath that Std:JsonGet uses here)."""
    value = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{path!r}: no {part!r} in the evaluation report")
        value = value[part]
    return value
