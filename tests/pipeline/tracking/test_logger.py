"""Whole executions of a small definition (plain-Python steps) logged to MLflow, read back
through ``MlflowClient``: the embedded SQLite store with no server at all, and a real
``mlflow server`` that goes down in the middle of a run (``trainpipe track sync`` then fills
the gap from the records). Tens of seconds each on 2 cores (importing MLflow, saving the
model), the server's start a minute more: marked slow.

    .venv/bin/pytest tests/pipeline/tracking -m slow
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.cli.main import main
from pipeline.local.runner import PipelineRunner, RunOptions
from pipeline.tracking import jobs
from pipeline.tracking import records as R
from pipeline.tracking import target as T
from pipeline.tracking.live import Tracker
from pipeline.tracking.logger import (
    PYFUNC_ARTIFACT,
    STATE_FILE,
    last_link,
    read_state,
    sync_execution,
)

from .conftest import EPOCH_SCORES, put_step_code, small_definition

REPO = Path(__file__).resolve().parents[3]
STEP_RUNS = {"Make", "Train", "Check", "Register"}


class Lines(io.StringIO):
    def lines(self) -> list[str]:
        return self.getvalue().splitlines()


def run(storage, workdir: Path, definition: dict, tracking: T.Target | None, parameters=None, use_cache=False):
    out = Lines()
    tracker = Tracker(tracking, workdir, storage, lambda text: out.write(text + "\n")) if tracking else None
    runner = PipelineRunner(definition, "tracked", RunOptions(
        workdir=workdir, storage=storage, echo=False, stream=out, use_cache=use_cache,
        execution_parameters=parameters or {}, tracker=tracker))
    return runner.run(), out, tracker


def runs_of(client: MlflowClient, pipeline: str = "tracked"):
    experiment = client.get_experiment_by_name(pipeline)
    found = client.search_runs([experiment.experiment_id], max_results=100)
    parents = [r for r in found if R.TAG_PARENT not in r.data.tags]
    children = [r for r in found if R.TAG_PARENT in r.data.tags]
    return parents, children


@pytest.mark.slow
def test_the_embedded_store_logs_every_step_with_no_server(step_code, tmp_path):
    target = T.resolve(None, tmp_path, {})  # neither flag nor MLFLOW_TRACKING_URI
    definition = small_definition()
    # The training job as `definition --tracking-uri` builds it, for the same store: run
    # locally, the runner logs the step and the job stands down (its chief would log a
    # second run of it from inside: training_entry/tracking.py needs TRAINPIPE_EXECUTION_ID).
    (train_step,) = [s for s in definition["Steps"] if s["Name"] == "Train"]
    train_step["Arguments"]["Environment"] = jobs.environment(
        target.uri, "tracked", {"Get": "Execution.PipelineExecutionId"})
    record, out, tracker = run(step_code, tmp_path, definition, target)
    assert record.status == "Succeeded", out.getvalue()
    job_log = "\n".join(p.read_text() for p in (Path(record.run_dir) / "jobs").rglob("*.log"))
    assert "execution variable: None" in job_log and "training started" in job_log
    assert (tmp_path / T.EMBEDDED_DB).is_file()
    assert not any("MLflow" in line for line in out.lines())
    client = MlflowClient(target.uri)
    (parent,), children = runs_of(client)
    assert parent.info.status == "FINISHED"
    assert parent.data.params == {"Score": "0.8", "Threshold": "0.5"}
    tags = parent.data.tags
    assert tags[R.TAG_EXECUTION] == record.execution_id and tags[R.TAG_RUN_NAME] == record.execution_id
    assert len(tags[R.TAG_DIGEST]) == 64 and tags[R.TAG_VERSION] == R.trainpipe_version()
    commit = tags[R.TAG_GIT_COMMIT]  # this checkout's (others may commit while the test runs)
    assert subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=REPO).returncode == 0
    by_name = {r.info.run_name: r for r in children}
    assert set(by_name) == STEP_RUNS
    assert {r.data.tags[R.TAG_PARENT] for r in children} == {parent.info.run_id}
    train = by_name["Train"]
    assert train.data.params["mode"] == "ok" and train.data.params["InstanceType"] == "ml.c5.xlarge"
    history = client.get_metric_history(train.info.run_id, "score")
    assert [(m.step, m.value) for m in history] == list(enumerate(EPOCH_SCORES, 1))
    assert train.data.metrics["wall_seconds"] > 0 and "co2e_kg" in train.data.metrics
    assert "cost_usd" in train.data.metrics
    assert by_name["Check"].data.tags[R.TAG_OUTCOME] == "true"
    # The registered model package is a version of the MLflow registered model of its group.
    register = by_name["Register"]
    (version,) = client.search_model_versions("name='group'")
    assert version.run_id == register.info.run_id
    assert version.tags[R.TAG_MODEL_PACKAGE] == register.data.tags[R.TAG_MODEL_PACKAGE]
    assert version.tags[R.TAG_MODEL_PACKAGE].startswith("arn:aws:sagemaker:")
    listed = {a.path for a in client.list_artifacts(register.info.run_id, "model")}
    assert "model/MLmodel" in listed
    # Everything stays in the workdir (no ./mlruns beside wherever the run was started).
    assert list((tmp_path / T.EMBEDDED_ARTIFACTS).rglob("MLmodel"))
    assert not Path("mlruns").exists()
    assert last_link(Path(record.run_dir)) == tracker.link()
    # The store was copied from one made elsewhere: its Default experiment points into this workdir.
    assert client.get_experiment("0").artifact_location == f"{(tmp_path / T.EMBEDDED_ARTIFACTS).as_uri()}/0"
    assert tracker.link() == T.UI_DEFAULT + f"/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}"

    # A server that took a request the client gave up on: a Train run the records never got
    # the id of. Syncing deletes it and logs the step again whole: one Train run, not two.
    state = read_state(Path(record.run_dir))
    state["targets"][target.uri]["steps"].pop("Train")
    (Path(record.run_dir) / STATE_FILE).write_text(json.dumps(state))
    orphan = client.create_run(parent.info.experiment_id, run_name="Train",
                               tags={R.TAG_PARENT: parent.info.run_id, R.TAG_STEP: "Train"})
    doc = json.loads((Path(record.run_dir) / "execution.json").read_text())
    assert sync_execution(doc, target, step_code, tmp_path / "registry.sqlite") == ["step Train"]
    (_,), children = runs_of(client)
    (train,) = [r for r in children if r.info.run_name == "Train"]
    assert train.info.run_id != orphan.info.run_id and len(children) == len(STEP_RUNS)
    assert [m.value for m in client.get_metric_history(train.info.run_id, "score")] == EPOCH_SCORES


@pytest.mark.slow
def test_a_cached_rerun_logs_its_steps_and_registers_no_second_version(step_code, tmp_path):
    target = T.embedded(tmp_path)
    first, out, _ = run(step_code, tmp_path, small_definition(), target, use_cache=True)
    again, out, _ = run(step_code, tmp_path, small_definition(), target, use_cache=True)
    assert first.status == again.status == "Succeeded", out.getvalue()
    assert again.step("Register").properties["ModelPackageArn"] == first.step("Register").properties["ModelPackageArn"]
    client = MlflowClient(target.uri)
    parents, children = runs_of(client)
    assert len(parents) == 2 and len(children) == 2 * len(STEP_RUNS)
    (version,) = client.search_model_versions("name='group'")  # one package, one version
    registers = [r for r in children if r.info.run_name == "Register"]
    assert {r.data.tags[R.TAG_MODEL_PACKAGE] for r in registers} == {version.tags[R.TAG_MODEL_PACKAGE]}
    states = [read_state(Path(r.run_dir))["targets"][target.uri] for r in (first, again)]
    assert [s["model_version"]["version"] for s in states] == [str(version.version)] * 2


@pytest.mark.slow
def test_a_failed_step_ends_failed_with_its_reason(step_code, tmp_path):
    target = T.embedded(tmp_path)
    record, out, _ = run(step_code, tmp_path, small_definition(), target, {"Threshold": 0.9})
    assert record.status == "Failed"
    client = MlflowClient(target.uri)
    (parent,), children = runs_of(client)
    assert parent.info.status == "FAILED"
    assert parent.data.tags[R.TAG_FAILURE] == record.failure_reason
    failed = {r.info.run_name: r for r in children}["TooLow"]
    assert failed.info.status == "FAILED"
    assert failed.data.tags[R.TAG_FAILURE] == "score 0.8 is below 0.9"
    assert {r.info.run_name for r in children} == {"Make", "Train", "Check", "TooLow"}


def test_tracking_off_writes_nothing(step_code, tmp_path):
    record, out, _ = run(step_code, tmp_path, small_definition(), T.resolve("off", tmp_path, {}))
    assert record.status == "Succeeded"
    assert not (tmp_path / T.EMBEDDED_DB).exists() and not (Path(record.run_dir) / STATE_FILE).exists()


def test_the_pyfunc_artifact_name_is_the_loaders():
    text = (REPO / "serving" / "mlflow_pyfunc.py").read_text()
    assert f'ARTIFACT = "{PYFUNC_ARTIFACT}"' in text


# --- a real server, through the command line ------------------------------------------------
def trainpipe(*args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)


def wait_for_run(client: MlflowClient, pipeline: str, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        experiment = client.get_experiment_by_name(pipeline)
        if experiment and any(r.info.run_name == name and r.info.status == "FINISHED"
                              for r in client.search_runs([experiment.experiment_id])):
            return
        time.sleep(0.2)
    raise AssertionError(f"no finished run {name} in {timeout} s")


@pytest.mark.slow
def test_a_server_that_goes_down_mid_run_fails_nothing_and_track_sync_fills_the_gap(mlflow_server, tmp_path,
                                                                                    monkeypatch, capsys):
    workdir = tmp_path / "work"
    from pipeline.local.store.storage import LocalStorage

    put_step_code(LocalStorage(workdir / "store"))
    release = tmp_path / "release"
    definition = tmp_path / "tracked.json"
    definition.write_text(json.dumps(small_definition(mode=f"wait:{release}")))
    env = {k: v for k, v in os.environ.items() if k != T.ENV_VAR}
    process = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                        "--no-cache", "--tracking-uri", mlflow_server.uri, env=env)
    lines = []
    try:
        for line in process.stdout:  # the job waits for `release` once training has started
            lines.append(line.rstrip("\n"))
            if "training started" in line:
                # The runner logs from a thread of its own: the server goes once Make's run
                # is on it, as it would be after any real step's minutes.
                wait_for_run(MlflowClient(mlflow_server.uri), "tracked", "Make")
                mlflow_server.stop()
                release.write_text("go")
        assert process.wait(timeout=120) == 0, "\n".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
        if mlflow_server.process is None:  # back up, on the same port and store
            mlflow_server.start()
    output = "\n".join(lines)
    assert lines[-1].endswith("Succeeded")
    mentions = [line for line in lines if "mlflow" in line.lower() or "urllib3" in line or "Retrying" in line]
    assert len(mentions) == 1, mentions  # the one warning, and no MLflow or urllib3 chatter
    (warning,) = mentions
    assert warning.startswith(f"warning: MLflow tracking at {mlflow_server.uri} failed (")
    assert "not logged: step Train, step Check, step Register, the execution's end" in warning
    assert "trainpipe track sync --workdir" in warning and "Traceback" not in output

    client = MlflowClient(mlflow_server.uri)
    (parent,), children = runs_of(client, "tracked")
    assert parent.info.status == "RUNNING"  # the end never reached the server
    assert {r.info.run_name for r in children} == {"Make"}

    sync = subprocess.run([sys.executable, "-m", "pipeline", "track", "sync", "--workdir", str(workdir)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    (execution_id,) = [p.name for p in (workdir / "runs").iterdir()]
    assert sync.stdout.startswith(f"execution {execution_id}: logged step Train, step Check, step Register, "
                                  f"the execution's end ({mlflow_server.uri}/#/experiments/")
    (parent_after,), children = runs_of(client, "tracked")
    assert parent_after.info.run_id == parent.info.run_id and parent_after.info.status == "FINISHED"
    by_name = {r.info.run_name: r for r in children}
    assert set(by_name) == STEP_RUNS and len(children) == len(STEP_RUNS)  # nothing twice
    history = client.get_metric_history(by_name["Train"].info.run_id, "score")
    assert [m.value for m in history] == EPOCH_SCORES
    # The commands below run in this process (main(), as `trainpipe` calls it): a new
    # interpreter each would cost seconds of imports and check nothing more.
    monkeypatch.delenv(T.ENV_VAR, raising=False)
    capsys.readouterr()
    # Once more: nothing left to log, nothing logged twice.
    assert main(["track", "sync", "--workdir", str(workdir)]) == 0
    assert "already logged" in capsys.readouterr().out
    assert len(runs_of(client, "tracked")[1]) == len(STEP_RUNS)
    # trainpipe executions --local shows the run's link.
    link = read_state(workdir / "runs" / execution_id)["targets"][mlflow_server.uri]["link"]
    assert main(["executions", "--local", "--workdir", str(workdir)]) == 0
    assert link in capsys.readouterr().out
    assert main(["status", "--local", "--workdir", str(workdir)]) == 0
    status = capsys.readouterr().out
    assert f"mlflow run     {link}" in status, status
    from pipeline import notebook

    assert notebook.local_results(workdir).mlflow_run == link  # what the notebook prints
