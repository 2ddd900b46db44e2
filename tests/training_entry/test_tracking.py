"""The training job's own MLflow run on SageMaker (training_entry/tracking.py), against a SQLite
store standing in for the tracking server: two jobs of one execution (a retried one) under one
parent run, hyperparameters and every epoch; nothing without the definition's variables; a
server that cannot be reached is one line and the training goes on."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from pipeline.tracking.logger import place_empty_store
from training_entry import contract
from training_entry.tracking import JobRun


@pytest.fixture
def environ(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    place_empty_store(tmp_path / "server.db")
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'server.db'}", "MLFLOW_EXPERIMENT_NAME": "pipe",
            contract.TRACKING_EXECUTION_ENV: "exec-1", "TRAINING_JOB_NAME": "pipe-TrainModel-1"}


def test_each_job_of_an_execution_is_a_child_of_its_run_with_every_epoch(environ):
    for job in ("pipe-TrainModel-1", "pipe-TrainModel-2"):
        run = JobRun.start({"epochs": 3, "batch_size": 32}, {**environ, "TRAINING_JOB_NAME": job})
        for epoch, accuracy in enumerate([0.5, 0.7, 0.9], 1):
            run.epoch(epoch, {"val_accuracy": accuracy, "loss": 1 - accuracy, "step_spread": None})
        run.end()
    client = MlflowClient(environ["MLFLOW_TRACKING_URI"])
    found = client.search_runs([client.get_experiment_by_name("pipe").experiment_id])
    (parent,) = [r for r in found if contract.TRACKING_TAG_PARENT not in r.data.tags]
    assert parent.data.tags[contract.TRACKING_TAG_EXECUTION] == "exec-1"
    jobs = {r.info.run_name: r for r in found if r.data.tags.get(contract.TRACKING_TAG_PARENT) == parent.info.run_id}
    assert set(jobs) == {"pipe-TrainModel-1", "pipe-TrainModel-2"}
    job = jobs["pipe-TrainModel-2"]
    assert job.info.status == "FINISHED" and job.data.params == {"epochs": "3", "batch_size": "32"}
    history = client.get_metric_history(job.info.run_id, "val_accuracy")
    assert [(m.step, m.value) for m in history] == [(1, 0.5), (2, 0.7), (3, 0.9)]


def test_nothing_starts_without_the_definitions_variables(environ):
    assert JobRun.start({}, {k: v for k, v in environ.items() if k != contract.TRACKING_EXECUTION_ENV}) is None
    assert JobRun.start({}, {k: v for k, v in environ.items() if k != "MLFLOW_TRACKING_URI"}) is None


def test_a_server_that_cannot_be_reached_is_one_line(environ, capsys):
    assert JobRun.start({}, {**environ, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}) is None
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("warning: MLflow tracking at http://127.0.0.1:9 failed (")
    assert line.endswith("the job goes on without it")


@pytest.mark.slow
def test_the_chief_of_a_two_rank_job_logs_every_epoch_once(environ, tmp_path):
    """train.py under mpirun, as SageMaker runs it, with the variables the definition sets:
    one run (the chief's, not one per rank), each epoch's metric line at its epoch."""
    from pipeline.local.hosts import mpi
    from tests.training_entry import helpers

    if mpi.mpirun_path() is None:
        pytest.skip("Open MPI's mpirun is not installed")
    splits = helpers.make_splits(tmp_path / "digits", shard_count=2)
    job = helpers.make_job(tmp_path / "job", splits, hosts=1, ranks_per_host=2, mode="File", epochs=2)
    result = helpers.run_job(job, extra_env=environ)
    assert result.returncode == 0, result.output[-3000:]
    client = MlflowClient(environ["MLFLOW_TRACKING_URI"])
    found = client.search_runs([client.get_experiment_by_name("pipe").experiment_id])
    (job_run,) = [r for r in found if contract.TRACKING_TAG_PARENT in r.data.tags]
    # Named by the job's own TRAINING_JOB_NAME (the container contract sets it, as SageMaker does).
    assert job_run.info.run_name == "test-job" and job_run.info.status == "FINISHED"
    assert job_run.data.params["epochs"] == "2"
    history = client.get_metric_history(job_run.info.run_id, "val_accuracy")
    assert [m.step for m in history] == [1, 2]
