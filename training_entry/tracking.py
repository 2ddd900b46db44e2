"""A SageMaker job's own MLflow run (``trainpipe definition --tracking-uri``): the training
job's chief, the processing job's first host and the evaluation job log one each. Dependency-
free until a run starts (MLflow is imported then): the processing and evaluation bundles ship
this package, so their entrypoints use it as training does.

The training chief logs it from inside the container as the local runner logs a local job from outside
(pipeline/tracking): in the experiment ``MLFLOW_EXPERIMENT_NAME``, a child of the execution's
run (the run tagged with the execution id ``TRAINPIPE_EXECUTION_ID``, created by the first job
of the execution that finds none), named after the job (``TRAINING_JOB_NAME``, set by
SageMaker), with the hyperparameters and every epoch's metrics at their epoch. It starts only
when the job's environment names both the URI and the execution, which only such a definition
sets: a local run's jobs, whose runner logs them, never log twice.

Tracking never fails the job: the first error is one line in the job's log, and nothing
more is tried. ``mlflow`` (``mlflow-skinny``, and ``sagemaker-mlflow`` for a tracking server
ARN) comes from the code's requirements.txt, which the definition writes: the training toolkit
installs it before the script; a processing image has no toolkit, so ``ensure_mlflow``
installs it when a run is about to start (and only then).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from training_entry import contract

URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
JOB_NAME_ENV = "TRAINING_JOB_NAME"  # SageMaker sets it in every training container
REQUIREMENTS_FILE = "requirements.txt"  # pipeline/tracking/jobs.py writes it into the code
# The MLflow calls below, as IAM names them for a SageMaker tracking server (sagemaker-mlflow:*):
# exactly what infra/template.yaml grants the execution role (tests/infra holds them equal).
MLFLOW_ACTIONS = ("GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun", "GetRun",
                  "LogBatch", "UpdateRun")
# A server that is down must cost the job seconds, not MLflow's default minutes of retries.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


class JobRun:
    def __init__(self, client, run_id: str):
        self.client = client
        self.run_id = run_id
        self.failed = False

    @classmethod
    def start(cls, hyperparameters: Mapping, environ: Mapping[str, str] = os.environ,
              job_name: str | None = None) -> JobRun | None:
        """The job's run, or None (no tracking variables; MLflow unreachable: one line).
        The run's name: TRAINING_JOB_NAME (a training container's), else the step's
        (TRAINPIPE_STEP_NAME, which the definition gives processing jobs), else ``job_name``."""
        uri, execution = environ.get(URI_ENV), environ.get(contract.TRACKING_EXECUTION_ENV)
        if not uri or not execution:
            return None
        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        try:
            from mlflow import MlflowClient
            from mlflow.entities import Param

            client = MlflowClient(uri)
            name = environ.get(EXPERIMENT_ENV) or "trainpipe"
            found = client.get_experiment_by_name(name)
            experiment = found.experiment_id if found else client.create_experiment(name)
            tagged = client.search_runs(
                [experiment], filter_string=f"tags.`{contract.TRACKING_TAG_EXECUTION}` = '{execution}'")
            parents = [r for r in tagged if contract.TRACKING_TAG_PARENT not in r.data.tags]
            parent = parents[0].info.run_id if parents else client.create_run(
                experiment, tags={contract.TRACKING_TAG_EXECUTION: execution, "mlflow.runName": execution},
                run_name=execution).info.run_id
            step = environ.get(contract.TRACKING_STEP_ENV)
            job = environ.get(JOB_NAME_ENV) or step or job_name or "training"
            tags = {contract.TRACKING_TAG_PARENT: parent, contract.TRACKING_TAG_EXECUTION: execution,
                    contract.TRACKING_TAG_JOB: job, "mlflow.runName": job}
            if step:  # the step it ran as: `trainpipe track sync --execution-arn` finds it by it
                tags[contract.TRACKING_TAG_STEP] = step
            run = client.create_run(experiment, run_name=job, tags=tags)
            params = [Param(str(k), contract.loggable_value(str(k), str(v))[:6000]) for k, v in hyperparameters.items()]
            for i in range(0, len(params), 100):  # MLflow takes 100 params a call
                client.log_batch(run.info.run_id, params=params[i:i + 100])
        except Exception as error:  # noqa: BLE001 (tracking never fails the training)
            _warn(uri, error)
            return None
        return cls(client, run.info.run_id)

    def epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        """One epoch's metrics (the metric line's), at step ``epoch``."""
        self.metrics(metrics, step=epoch)

    def metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Figures at ``step``; one that is missing (None) or not finite is left out."""
        if self.failed:
            return
        try:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            self.client.log_batch(self.run_id, metrics=[
                Metric(k, float(v), now, step) for k, v in metrics.items()
                if isinstance(v, (int, float)) and math.isfinite(v)])
        except Exception as error:  # noqa: BLE001
            self._give_up(error)

    def tags(self, tags: Mapping[str, str]) -> None:
        if self.failed:
            return
        try:
            from mlflow.entities import RunTag

            self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()])
        except Exception as error:  # noqa: BLE001
            self._give_up(error)

    def artifacts(self, directory: str | Path, artifact_path: str | None = None) -> None:
        """Every file under ``directory``, under ``artifact_path`` in the run."""
        if self.failed:
            return
        try:
            self.client.log_artifacts(self.run_id, str(directory), artifact_path)
        except Exception as error:  # noqa: BLE001
            self._give_up(error)

    def end(self, status: str = "FINISHED") -> None:
        if self.failed:
            return
        try:
            self.client.set_terminated(self.run_id, status=status)
        except Exception as error:  # noqa: BLE001
            self._give_up(error)

    def _give_up(self, error: Exception) -> None:
        self.failed = True
        _warn(self.client.tracking_uri, error)


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the definition asked this job to log (both variables set)."""
    return bool(environ.get(URI_ENV) and environ.get(contract.TRACKING_EXECUTION_ENV))


def ensure_mlflow(environ: Mapping[str, str] = os.environ, code_dir: str | Path | None = None) -> bool:
    """MLflow importable, installing the code's requirements.txt first where it is not (a
    processing image: no toolkit installs it). False, with one line, when it cannot be.
    ``code_dir``: the code's root (default: the folder holding this package, as every
    bundle has it: /opt/ml/processing/input/code, /opt/ml/code)."""
    if not wanted(environ):
        return False
    try:
        import mlflow  # noqa: F401
        return True
    except ImportError:
        pass
    requirements = Path(code_dir or Path(__file__).resolve().parents[1]) / REQUIREMENTS_FILE
    if not requirements.is_file():
        _warn(environ.get(URI_ENV, ""), RuntimeError(f"mlflow is not installed and {requirements} is missing"))
        return False
    # SageMaker: as the training toolkit does with the code's requirements.txt.
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-r", str(requirements)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        _warn(environ.get(URI_ENV, ""), RuntimeError(f"pip install -r {requirements}: {done.stderr.strip()}"))
        return False
    return True


def _warn(uri: str, error: Exception) -> None:
    # A password in the URI (or echoed in the error) never reaches the job's log.
    first = contract.redact((str(error).strip().splitlines() or [type(error).__name__])[0])[:200]
    print(f"warning: MLflow tracking at {contract.redact(uri)} failed ({first}); the job goes on without it",
          file=sys.stderr, flush=True)
