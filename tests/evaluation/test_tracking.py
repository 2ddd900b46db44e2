"""The evaluation job's MLflow run on SageMaker (evaluation/tracking.py), against a SQLite store
standing in for the tracking server: evaluation.json's metrics, the report, the confusion matrix
and the misclassified images as artifacts, in a child run of the execution's run named after
its step; nothing without the definition's variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from evaluation import report
from evaluation.tracking import log_evaluation
from pipeline.tracking.logger import place_empty_store
from training_entry import contract

DOCUMENT = {
    "kind": report.KIND_IMAGE, "records": 20, "class_names": ["cat", "dog"],
    "metrics": {"accuracy": {"value": 0.85}, "loss": {"value": 0.4}, "top_k_accuracy": {"value": 1.0, "k": 2}},
    "confusion_matrix": [[9, 1], [2, 8]],
    "misclassified": [{"file": f"{report.MISCLASSIFIED_DIR}/0-cat-as-dog.png", "true": "cat"}],
}


@pytest.fixture
def environ(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    place_empty_store(tmp_path / "server.db")
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'server.db'}", "MLFLOW_EXPERIMENT_NAME": "pipe",
            contract.TRACKING_EXECUTION_ENV: "exec-1", contract.TRACKING_STEP_ENV: "EvaluateModel"}


def test_the_metrics_and_the_artifacts_in_a_child_of_the_executions_run(environ, tmp_path):
    output = tmp_path / "output"
    (output / report.MISCLASSIFIED_DIR).mkdir(parents=True)
    (output / report.MISCLASSIFIED_DIR / "0-cat-as-dog.png").write_bytes(b"\x89PNG picture")
    log_evaluation(DOCUMENT, str(output), environ)
    client = MlflowClient(environ["MLFLOW_TRACKING_URI"])
    runs = client.search_runs([client.get_experiment_by_name("pipe").experiment_id])
    (parent,) = [r for r in runs if contract.TRACKING_TAG_PARENT not in r.data.tags]
    (run,) = [r for r in runs if r.data.tags.get(contract.TRACKING_TAG_PARENT) == parent.info.run_id]
    assert parent.data.tags[contract.TRACKING_TAG_EXECUTION] == "exec-1"
    assert run.info.run_name == "EvaluateModel" and run.info.status == "FINISHED"
    assert run.data.tags[contract.TRACKING_TAG_STEP] == "EvaluateModel"
    assert run.data.metrics == {"accuracy": 0.85, "loss": 0.4, "top_k_accuracy": 1.0, "test_records": 20}
    listed = {a.path for a in client.list_artifacts(run.info.run_id, "evaluation")}
    assert listed == {"evaluation/evaluation.json", "evaluation/confusion_matrix.json", "evaluation/misclassified"}
    matrix = json.loads(Path(client.download_artifacts(run.info.run_id, "evaluation/confusion_matrix.json")).read_text())
    assert matrix["class_names"] == ["cat", "dog"] and matrix["matrix"] == [[9, 1], [2, 8]]
    picture = client.download_artifacts(run.info.run_id, "evaluation/misclassified/0-cat-as-dog.png")
    assert Path(picture).read_bytes() == b"\x89PNG picture"


def test_nothing_without_the_definitions_variables(environ, tmp_path):
    log_evaluation(DOCUMENT, str(tmp_path), {k: v for k, v in environ.items() if k != contract.TRACKING_EXECUTION_ENV})
    client = MlflowClient(environ["MLFLOW_TRACKING_URI"])
    assert client.get_experiment_by_name("pipe") is None


def test_a_server_that_cannot_be_reached_is_one_line(environ, tmp_path, capsys):
    log_evaluation(DOCUMENT, str(tmp_path), {**environ, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"})
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("warning: MLflow tracking at http://127.0.0.1:9 failed (")
