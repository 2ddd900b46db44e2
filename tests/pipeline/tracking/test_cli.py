"""The tracking refusals through the command line, before any step or job runs: an SDK v3
definition whose MlflowConfig names a SageMaker tracking server this machine cannot reach
(no sagemaker-mlflow plugin in this venv), and `trainpipe train --local --tracking-uri`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.tracking import target as T
from tests.pipeline.local.sdk_pipelines import v3
from tests.pipeline.local.test_sdk_v3_pipeline import write_pipeline

from .test_target import ARN, V3_CONFIG

REPO = Path(__file__).resolve().parents[3]


def trainpipe(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (T.SWITCH_ENV_VAR, T.ENV_VAR)}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)


def test_a_v3_definition_logging_to_an_arn_this_machine_cannot_reach_is_refused_before_any_step(tmp_path):
    workdir = tmp_path / "work"
    path = write_pipeline(workdir, tmp_path, v3.mpi(2))
    definition = json.loads(path.read_text())
    assert definition["MlflowConfig"] is None  # as v3 writes it without mlflow_config
    definition["MlflowConfig"] = V3_CONFIG
    path.write_text(json.dumps(definition))
    done = trainpipe("run", "--local", "--definition", str(path), "--workdir", str(workdir))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert f"MlflowConfig logs to the SageMaker MLflow tracking server {ARN}" in last
    assert "pip install sagemaker-mlflow" in last and "--tracking-uri URL|off" in last
    assert not (workdir / "runs").exists() or not list((workdir / "runs").glob("*/jobs/*"))


def test_train_local_refuses_a_tracking_uri_it_would_ignore(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    done = trainpipe("train", "--local", "--entry-point", str(script), "--workdir", str(tmp_path / "work"),
                     "--tracking-uri", "http://127.0.0.1:5000")
    assert done.returncode == 2 and "never runs" not in done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("trainpipe train: error: --tracking-uri http://127.0.0.1:5000: `trainpipe train --local` "
                           "runs one job outside any pipeline and logs nothing to MLflow")
