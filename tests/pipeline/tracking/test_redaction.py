"""A tracking URI's password (``https://user:password@host``) is never printed or stored: the
Tracker's warning and its sync command, the run link, the UI command, ``mlflow.json``; and
``track sync`` finds the server again from ``$MLFLOW_TRACKING_URI``, or refuses in one line.
With a stand-in for MlflowClient: seconds, no MLflow import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from pipeline.local.execution import ExecutionRecord
from pipeline.tracking import target as T
from pipeline.tracking.logger import STATE_FILE, ExecutionLog
from tests import readme_record
from training_entry.contract import redact

from .test_live import quiet_tracker

REPO = Path(__file__).resolve().parents[3]
URI = "https://trainer:hunter2@mlflow.example.com:5000"
SHOWN = "https://***@mlflow.example.com:5000"


class Client:
    """What ExecutionLog.ensure_parent asks of MlflowClient."""

    def get_experiment_by_name(self, name):
        return SimpleNamespace(experiment_id="7")

    def create_run(self, experiment, **kwargs):
        return SimpleNamespace(info=SimpleNamespace(run_id="r1"))

    def log_batch(self, *args, **kwargs):
        pass


def test_redact_replaces_the_user_information_of_every_uri_in_a_text():
    assert redact(URI + "/api") == SHOWN + "/api"
    assert redact("at http://token@h/x and sqlite:////tmp/a@b.db, s3://b/k") == \
        "at http://***@h/x and sqlite:////tmp/a@b.db, s3://b/k"


def test_the_warning_its_sync_command_and_the_ui_command_show_no_password(monkeypatch, tmp_path):
    tracker, said = quiet_tracker(monkeypatch, tmp_path, fail=ConnectionError(f"POST {URI}/api/2.0 refused"))
    tracker.target = T.Target(URI, embedded=False)
    record = ExecutionRecord("e-6", "tracked", str(tmp_path / "run"), {})
    tracker.started(record)
    record.status = "Succeeded"
    tracker.ended(record)
    (warning,) = said
    assert "hunter2" not in warning
    assert warning.startswith(f"warning: MLflow tracking at {SHOWN} failed (POST {SHOWN}/api/2.0 refused)")
    assert f"--tracking-uri '{SHOWN}'`" in warning
    assert T.Target(URI, embedded=False).ui_command() == f"open {SHOWN}"


def test_mlflow_json_and_the_run_link_hold_no_password_and_sync_finds_the_server_again(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "e-7"
    run_dir.mkdir(parents=True)
    record = ExecutionRecord("e-7", "tracked", str(run_dir), {}, status="Succeeded")
    log = ExecutionLog(T.Target(URI, embedded=False), run_dir, None, None, client=Client())
    log.ensure_parent(record)
    stored = (run_dir / STATE_FILE).read_text()
    assert "hunter2" not in stored
    assert json.loads(stored)["last"] == SHOWN
    assert log.entry["link"] == f"{SHOWN}/#/experiments/7/runs/r1"

    from pipeline.cli.track import _target_of

    args = SimpleNamespace(tracking_uri=None)
    monkeypatch.setenv(T.ENV_VAR, URI)  # the same server, with its password, from the environment
    assert _target_of(run_dir, args, tmp_path).uri == URI
    monkeypatch.delenv(T.ENV_VAR)
    (run_dir / "execution.json").write_text(json.dumps({"execution_id": "e-7", "pipeline_name": "tracked",
                                                       "run_dir": str(run_dir), "status": "Succeeded",
                                                       "parameters": {}, "steps": []}))
    done = subprocess.run([sys.executable, "-m", "pipeline", "track", "sync", "--workdir", str(tmp_path),
                           "--execution", "e-7"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in __import__("os").environ.items() if k != T.ENV_VAR})
    (line,) = done.stderr.strip().splitlines()
    readme_record.record(line)
    assert done.returncode == 2 and line == (
        f"trainpipe track: error: execution e-7 logged to {SHOWN}, whose credentials trainpipe does not store: "
        f"give the URI again with --tracking-uri URI or $MLFLOW_TRACKING_URI")


def test_parameters_named_as_secrets_are_logged_as_stars_and_uris_without_credentials(tmp_path):
    from pipeline.tracking import records as R

    record = ExecutionRecord("e-8", "tracked", str(tmp_path), {
        "db_password": "hunter2", "api_token": "tok-1", "ApiToken": "tok-2", "aws-secret-access-key": "k",
        "Epochs": "3", "DbUrl": "postgres://app:hunter2@db.example/prod"})
    assert R.parent_run(record).params == {
        "db_password": "***", "api_token": "***", "ApiToken": "***", "aws-secret-access-key": "***",
        "Epochs": "3", "DbUrl": "postgres://***@db.example/prod"}


def test_a_refusal_that_echoes_the_tracking_uri_shows_no_password(tmp_path):
    """Every one-line refusal the CLI prints goes through redact: `train --local --tracking-uri`
    echoed the URI as given (the old code printed the password)."""
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    done = subprocess.run([sys.executable, "-m", "pipeline", "train", "--local", "--entry-point", str(script),
                           "--workdir", str(tmp_path / "work"), "--tracking-uri", URI],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "hunter2" not in done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    readme_record.record(last)
    assert last.startswith(f"trainpipe train: error: --tracking-uri {SHOWN}: `trainpipe train --local` runs one job "
                           f"outside any pipeline and logs nothing to MLflow"), last
