"""The training job's own MLflow run, on SageMaker (``trainpipe definition --tracking-uri``).

The chief logs it from inside the container as the local runner logs a local job from outside
(pipeline/tracking): in the experiment ``MLFLOW_EXPERIMENT_NAME``, a child of the execution's
run (the run tagged with the execution id ``TRAINPIPE_EXECUTION_ID``, created by the first job
of the execution that finds none), named after the job (``TRAINING_JOB_NAME``, set by
SageMaker), with the hyperparameters and every epoch's metrics at their epoch. It starts only
when the job's environment names both the URI and the execution, which only such a definition
sets: a local run's jobs, whose runner logs them, never log twice.

Tracking never fails the training: the first error is one line in the job's log, and nothing
more is tried. ``mlflow`` (``mlflow-skinny``, and ``sagemaker-mlflow`` for a tracking server
ARN) comes from the code's requirements.txt, which the definition writes.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping

from training_entry import contract

URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
JOB_NAME_ENV = "TRAINING_JOB_NAME"  # SageMaker sets it in every training container
# The MLflow calls below, as IAM names them for a SageMaker tracking server (sagemaker-mlflow:*):
# exactly what infra/template.yaml grants the execution role (tests/infra holds them equal).
MLFLOW_ACTIONS = ("GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun", "LogBatch",
                  "UpdateRun")
# A server that is down must cost the job seconds, not MLflow's default minutes of retries.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


class JobRun:
    def __init__(self, client, run_id: str):
        self.client = client
        self.run_id = run_id
        self.failed = False

    @classmethod
    def start(cls, hyperparameters: Mapping, environ: Mapping[str, str] = os.environ) -> JobRun | None:
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
            job = environ.get(JOB_NAME_ENV) or "training"
            run = client.create_run(experiment, run_name=job, tags={
                contract.TRACKING_TAG_PARENT: parent, contract.TRACKING_TAG_EXECUTION: execution,
                contract.TRACKING_TAG_JOB: job, "mlflow.runName": job})
            params = [Param(str(k), str(v)[:6000]) for k, v in hyperparameters.items()]
            for i in range(0, len(params), 100):  # MLflow takes 100 params a call
                client.log_batch(run.info.run_id, params=params[i:i + 100])
        except Exception as error:  # noqa: BLE001 (tracking never fails the training)
            _warn(uri, error)
            return None
        return cls(client, run.info.run_id)

    def epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        """One epoch's metrics (the metric line's), at step ``epoch``."""
        if self.failed:
            return
        try:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            # As the metric line: a figure the epoch lacks (None) or that is not finite is left out.
            self.client.log_batch(self.run_id, metrics=[
                Metric(k, float(v), now, epoch) for k, v in metrics.items()
                if v is not None and math.isfinite(v)])
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


def _warn(uri: str, error: Exception) -> None:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    print(f"warning: MLflow tracking at {uri} failed ({first}); the training goes on without it",
          file=sys.stderr, flush=True)
