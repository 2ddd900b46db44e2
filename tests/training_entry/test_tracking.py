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


def test_a_hyperparameter_named_as_a_secret_is_logged_as_stars(environ):
    JobRun.start({"epochs": 3, "db_password": "hunter2"}, environ).end()
    client = MlflowClient(environ["MLFLOW_TRACKING_URI"])
    found = client.search_runs([client.get_experiment_by_name("pipe").experiment_id])
    (job,) = [r for r in found if contract.TRACKING_TAG_PARENT in r.data.tags]
    assert job.data.params == {"epochs": "3", "db_password": "***"}


def test_nothing_starts_without_the_definitions_variables(environ):
    assert JobRun.start({}, {k: v for k, v in environ.items() if k != contract.TRACKING_EXECUTION_ENV}) is None
    assert JobRun.start({}, {k: v for k, v in environ.items() if k != "MLFLOW_TRACKING_URI"}) is None


def test_a_server_that_cannot_be_reached_is_one_line(environ, capsys):
    assert JobRun.start({}, {**environ, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}) is None
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("warning: MLflow tracking at http://127.0.0.1:9 failed (")
    assert line.endswith("the job goes on without it")


def test_a_password_in_the_uri_never_reaches_the_jobs_log(environ, capsys):
    uri = "http://trainer:hunter2@127.0.0.1:9"
    assert JobRun.start({}, {**environ, "MLFLOW_TRACKING_URI": uri}) is None
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("warning: MLflow tracking at http://***@127.0.0.1:9 failed (") and "hunter2" not in line


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


# --- a processing image without MLflow: the code's requirements.txt is installed first ----------
def _wheel(folder, name: str, version: str, init: str):
    """A minimal pure-Python wheel of ``name`` (pip installs it with no index, no network)."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": init,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()] + [f"{dist}/RECORD,,"]
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


@pytest.mark.slow
def test_an_image_without_mlflow_installs_the_codes_requirements_first_or_says_why_not(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    image = tmp_path / "image"  # a Python with pip and no MLflow, as a processing image
    subprocess.run([sys.executable, "-m", "venv", str(image)], check=True, capture_output=True, timeout=300)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "mlflow", "9.9.9", "INSTALLED_BY = 'requirements.txt'\n")
    probe = ("import json, sys; from training_entry import tracking; "
             "ok = tracking.ensure_mlflow({'MLFLOW_TRACKING_URI': 'http://x', "
             f"'{contract.TRACKING_EXECUTION_ENV}': 'e'}}, sys.argv[1]); "
             "import importlib.util; print(json.dumps([ok, importlib.util.find_spec('mlflow') is not None]))")

    def job(code: Path):
        done = subprocess.run([str(image / "bin" / "python"), "-c", probe, str(code)], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo),
                                                              "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr

    missing = tmp_path / "no-requirements"
    missing.mkdir()
    (ok, importable), stderr = job(missing)
    assert (ok, importable) == (False, False)
    assert stderr.count("\n") == 1 and "requirements.txt is missing); the job goes on without it" in stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "requirements.txt").write_text("no-such-package-xyz==1\n")
    (ok, importable), stderr = job(broken)
    assert (ok, importable) == (False, False)
    assert stderr.startswith("warning: MLflow tracking at http://x failed (pip install -r ") and stderr.count("\n") == 1

    code = tmp_path / "code"
    code.mkdir()
    (code / "requirements.txt").write_text(f"--find-links {wheels}\nmlflow==9.9.9\n")
    (ok, importable), stderr = job(code)
    assert (ok, importable) == (True, True), stderr
