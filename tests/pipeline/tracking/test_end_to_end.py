"""End-to-end: trainpipe's own pipeline on the bundled digits (one rank, 4 epochs), run by
`trainpipe run --local --tracking-uri` against a real `mlflow server` on 127.0.0.1, then read
back through ``MlflowClient`` as a team would: the runs, the parameters, every epoch's metrics,
the evaluation artifacts, and the registered model loaded back and answering a row. One run
serves every test here; one rank, since what is logged is the chief's (the ranks' own lines are
training_entry's tests). Slow:

    .venv/bin/pytest tests/pipeline/tracking -m slow
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.definition import build as D
from pipeline.definition import parameters as P
from pipeline.local.hosts import mpi
from pipeline.settings import Settings
from pipeline.tracking import records as R

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed"),
]
REPO = Path(__file__).resolve().parents[3]
EPOCHS = 4
FAST = ["-p", f"Epochs={EPOCHS}", "-p", "WarmupEpochs=1", "-p", "BaseLearningRate=0.01",
        "-p", "TrainingInstanceCount=1", "-p", "ProcessesPerHost=1"]


@pytest.fixture(scope="module")
def tracked(mlflow_server, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("work")
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--quiet", "--workdir", str(workdir),
         "--tracking-uri", mlflow_server.uri, *FAST],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=os.environ)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    client = MlflowClient(mlflow_server.uri)
    experiment = client.get_experiment_by_name(Settings().pipeline_name)
    found = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in found if R.TAG_PARENT not in r.data.tags]
    children = {r.info.run_name: r for r in found if R.TAG_PARENT in r.data.tags}
    return result, client, parent, children, workdir


def test_the_summary_links_the_run_and_the_ui(tracked, mlflow_server):
    result, _, parent, _, workdir = tracked
    (execution_id,) = [p.name for p in (workdir / "runs").iterdir()]
    # The model is ours (a SavedModel): predict is offered (serving.files.answerable_archive).
    assert f"try it:        trainpipe predict --workdir {workdir} --run {execution_id} FILE..." in result.stdout
    line = next(line for line in result.stdout.splitlines() if line.startswith("mlflow run:"))
    assert f"{mlflow_server.uri}/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}" in line
    assert "WARNING" not in result.stdout + result.stderr and "warning: MLflow" not in result.stdout


def test_the_parent_run_holds_the_pipeline_parameters_and_each_step_a_child(tracked):
    _, _, parent, children, workdir = tracked
    assert parent.info.status == "FINISHED"
    (execution_id,) = [p.name for p in (workdir / "runs").iterdir()]
    assert parent.data.tags[R.TAG_EXECUTION] == execution_id
    assert parent.data.params[P.EPOCHS] == str(EPOCHS)
    assert set(parent.data.params) >= {P.INPUT_DATA_URI, P.EPOCHS, "AccuracyThreshold"}
    # Every step that ran (the batch-inference branch has no BatchInputUri: not executed).
    executed = [s["name"] for s in json.loads((workdir / "runs" / execution_id / "execution.json")
                                              .read_text())["steps"] if s["status"] == "Succeeded"]
    assert set(children) == set(executed)
    assert set(executed) >= {D.STEP_PREPROCESS, D.STEP_TRAIN, D.STEP_EVALUATE, D.STEP_CONDITION,
                             f"{D.STEP_REGISTER}-{D.STEP_REGISTER}"}
    assert {r.info.status for r in children.values()} == {"FINISHED"}
    assert parent.data.metrics["co2e_kg"] >= 0 and "cost_usd" in parent.data.metrics


def test_the_training_run_has_every_epochs_metrics_and_its_hyperparameters(tracked):
    _, client, _, children, _ = tracked
    train = children[D.STEP_TRAIN]
    assert train.data.params["epochs"] == str(EPOCHS)
    for metric in ("val_accuracy", "loss", "throughput"):
        history = client.get_metric_history(train.info.run_id, metric)
        assert [m.step for m in history] == list(range(1, EPOCHS + 1)), metric
    assert train.data.metrics["val_accuracy"] > 0.8
    assert {"wall_seconds", "cost_usd", "co2e_kg"} <= set(train.data.metrics)


def test_the_evaluation_run_has_its_metrics_and_the_confusion_matrix(tracked):
    _, client, _, children, _ = tracked
    evaluate = children[D.STEP_EVALUATE]
    assert evaluate.data.metrics["accuracy"] >= 0.9
    listed = {a.path for a in client.list_artifacts(evaluate.info.run_id, "evaluation")}
    assert {"evaluation/evaluation.json", "evaluation/confusion_matrix.json",
            "evaluation/confusion_matrix.png"} <= listed
    local = client.download_artifacts(evaluate.info.run_id, "evaluation/confusion_matrix.json")
    matrix = json.loads(Path(local).read_text())
    assert len(matrix["matrix"]) == len(matrix["class_names"]) == 10
    assert children[D.STEP_CONDITION].data.tags[R.TAG_OUTCOME] == "true"


def test_the_registered_model_loads_back_and_answers_a_row(tracked, monkeypatch):
    import mlflow.pyfunc

    from pipeline.data.default import digits_csv

    _, client, _, children, _ = tracked
    register = children[f"{D.STEP_REGISTER}-{D.STEP_REGISTER}"]
    group = Settings().model_package_group
    (version,) = client.search_model_versions(f"name='{group}'")
    assert version.run_id == register.info.run_id
    assert version.tags[R.TAG_MODEL_PACKAGE] == register.data.tags[R.TAG_MODEL_PACKAGE]
    # set_tracking_uri also sets MLFLOW_TRACKING_URI for child processes: given back after the test.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", client.tracking_uri)
    mlflow.set_tracking_uri(client.tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/{group}/{version.version}")
    row = [float(v) for v in digits_csv().decode().splitlines()[1].split(",")[:-1]]
    (answer,) = model.predict([row])
    assert len(answer["probabilities"]) == 10 and abs(sum(answer["probabilities"]) - 1) < 1e-3
    assert str(answer["classes"]) in [str(i) for i in range(10)]
