"""What the SageMaker jobs get when the definition is built with ``--tracking-uri``: they log
to MLflow from inside their containers (``training_entry/tracking.py``; the processing and
evaluation entrypoints through it), so the URI must be one a job can reach, and the job must
be allowed to reach it. No MLflow import here.

- ``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME`` (the pipeline's name, as local runs use)
  and ``TRAINPIPE_EXECUTION_ID`` (the execution, which groups the jobs' runs under one parent
  run) in the training, preprocessing and evaluation jobs' environments, and the processing
  jobs' ``TRAINPIPE_STEP_NAME`` (their runs' names);
- ``requirements.txt`` in each job's code: ``mlflow-skinny``, and ``sagemaker-mlflow`` where
  the URI is a SageMaker tracking server ARN (the plugin that resolves it and signs requests).
  The training toolkit installs it before the script; the processing entrypoints install it
  themselves, only when the variables say to log (training_entry/tracking.ensure_mlflow).
"""

from __future__ import annotations

from pipeline.errors import UserError
from pipeline.tracking.target import is_tracking_arn
from training_entry.contract import TRACKING_EXECUTION_ENV, TRACKING_STEP_ENV, has_userinfo, redact

REQUIREMENTS_FILE = "requirements.txt"
# The SageMaker TensorFlow training toolkit pip-installs the code's requirements.txt first.
REQUIREMENTS = ["mlflow-skinny"]
ARN_REQUIREMENTS = ["sagemaker-mlflow"]


def check(uri: str, network_isolation: bool) -> None:
    """One line, before anything is built, for a URI the jobs could not log to, or one that
    would carry a credential to SageMaker: the definition holds the jobs' environment, and
    anyone who may describe the pipeline or its executions reads it."""
    if has_userinfo(uri):
        raise UserError(
            f"--tracking-uri {redact(uri)}: the URI carries credentials, and the definition (where the "
            f"jobs' MLFLOW_TRACKING_URI is written) is readable by anyone who may describe the pipeline; "
            f"give the URI without them, e.g. a SageMaker MLflow tracking server ARN, whose requests "
            f"the jobs sign with their role")
    if not (uri.startswith(("http://", "https://")) or is_tracking_arn(uri)):
        raise UserError(
            f"--tracking-uri {uri}: SageMaker's jobs log from inside their containers and cannot "
            f"reach a store on this machine; give an http(s):// tracking server or a SageMaker "
            f"MLflow tracking server ARN (arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>)")
    if network_isolation:
        raise UserError(
            f"--tracking-uri {uri}: the jobs run with network isolation and could not reach it; "
            f"add --no-network-isolation (the jobs then need a route to the server: the internet "
            f"or a VPC endpoint)")


def environment(uri: str, pipeline_name: str, execution_id, step: str | None = None) -> dict:
    """A job's environment (``execution_id``: the SDK's execution variable; ``step``: the
    step a processing job runs as, its run's name: its container has no job name to use)."""
    return {"MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": pipeline_name,
            TRACKING_EXECUTION_ENV: execution_id, **({TRACKING_STEP_ENV: step} if step else {})}


def requirements(uri: str | None) -> bytes | None:
    """The training code's requirements.txt, or None without tracking."""
    if not uri:
        return None
    return ("\n".join(REQUIREMENTS + (ARN_REQUIREMENTS if is_tracking_arn(uri) else [])) + "\n").encode()
