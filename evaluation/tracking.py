"""The evaluation job's MLflow run on SageMaker (``trainpipe definition --tracking-uri``):
``evaluation.json``'s metrics, and as artifacts the report, the confusion matrix and the
misclassified images, laid out as the local runner logs an evaluation step
(pipeline/tracking/records.py: ``evaluation/...``), in a child run of the execution's run
(training_entry/tracking.py). Nothing without the definition's variables (a local run's runner
logs the step itself); never fails the evaluation.

The confusion matrix and misclassified grid pictures the local runner draws come from the
notebook's matplotlib figures, which the evaluation image lacks: the job logs the matrix as
JSON and the misclassified images themselves.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from evaluation import report
from training_entry import tracking

ARTIFACT_DIR = "evaluation"


def log_evaluation(document: dict, output_dir: str, environ: Mapping[str, str] = os.environ) -> None:
    if not tracking.ensure_mlflow(environ):
        return
    run = tracking.JobRun.start({"kind": document.get("kind", "")}, environ, job_name="evaluation")
    if run is None:
        return
    figures = {name: metric.get("value") for name, metric in (document.get("metrics") or {}).items()
               if isinstance(metric, dict)}
    if isinstance(document.get("records"), int):
        figures["test_records"] = document["records"]
    run.metrics(figures)
    with tempfile.TemporaryDirectory(prefix="trainpipe-mlflow-") as scratch:
        root = Path(scratch)
        (root / report.REPORT_FILE).write_text(json.dumps(document, indent=2))
        matrix = document.get("confusion_matrix")
        if matrix:
            names = document.get("class_names") or [str(i) for i in range(len(matrix))]
            (root / "confusion_matrix.json").write_text(json.dumps(
                {"class_names": names, "matrix": matrix, "rows": "true label", "columns": "predicted label"},
                indent=2))
        for entry in document.get("misclassified") or []:
            relative = entry.get("file")
            source = Path(output_dir) / relative if relative else None
            if source is not None and source.is_file():
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, root / relative)
        run.artifacts(root, ARTIFACT_DIR)
    run.end()
