"""Where an execution's MLflow runs go, decided before the run starts (no MLflow import here).

First match wins: ``--tracking-uri``, then the definition's own ``MlflowConfig`` (SDK v3's
``Pipeline(mlflow_config=...)``: a SageMaker tracking server ARN and an experiment name), then
``MLFLOW_TRACKING_URI`` (MLflow's own variable, so a team's existing setting just works), then
the embedded store in the workdir. ``off`` as the flag, or ``TRAINPIPE_TRACKING=off`` in the
environment (a CI that tests other things; the test suite), logs nothing.

The embedded store is SQLite (``<workdir>/mlflow.db``, artifacts in ``<workdir>/mlartifacts``),
not MLflow's ``file:`` store: MLflow 3 refuses a ``file:`` store unless
``MLFLOW_ALLOW_FILE_STORE`` is set (it is deprecated), and it lacks what a team uses the
registry for (model versions with aliases, search over runs and LoggedModels). SQLite is one
file, needs no server, is what ``mlflow ui`` and ``mlflow server`` read as a backend store, and
comes with the full ``mlflow`` package the project installs.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from pipeline.errors import UserError
from training_entry.contract import redact

ENV_VAR = "MLFLOW_TRACKING_URI"
SWITCH_ENV_VAR = "TRAINPIPE_TRACKING"
OFF = "off"
EMBEDDED_DB = "mlflow.db"
EMBEDDED_ARTIFACTS = "mlartifacts"
# What `mlflow ui` serves on when given no --port: the run links of the embedded store.
UI_DEFAULT = "http://127.0.0.1:5000"
# MLflow 3's UI keeps a workflow type (GenAI or machine learning) and takes it from the link.
UI_RUNS_VIEW = "workflowType=machine_learning"
# A SageMaker managed tracking server (the sagemaker-mlflow plugin resolves these ARNs).
ARN_PREFIX = "arn:aws"
ARN_SERVICES = ("mlflow-tracking-server", "mlflow-app")
ARN_PLUGIN = "sagemaker-mlflow"  # the package; it resolves these ARNs and signs the requests
ARN_PLUGIN_MODULE = "sagemaker_mlflow"
# SDK v3: Pipeline(mlflow_config=MlflowConfig(mlflow_resource_arn=, mlflow_experiment_name=))
# writes {"MlflowConfig": {"MlflowResourceArn": ..., "MlflowExperimentName": ...}} at the
# definition's top, null without one (aws/sagemaker-python-sdk a24812666,
# sagemaker-mlops/src/sagemaker/mlops/workflow/pipeline.py: Pipeline.definition(),
# _convert_mlflow_config_to_request). SageMaker logs the execution there; run locally, so do we.
DEFINITION_CONFIG = "MlflowConfig"
DEFINITION_ARN = "MlflowResourceArn"
DEFINITION_EXPERIMENT = "MlflowExperimentName"
HELP = (f"MLflow: where runs are logged. run --local: an http(s):// tracking server, a SageMaker "
        f"tracking server ARN, or any MLflow tracking URI; '{OFF}' logs nothing (default: ${ENV_VAR}, "
        f"else the embedded SQLite store <workdir>/{EMBEDDED_DB}; none with {SWITCH_ENV_VAR}={OFF}). "
        f"definition/upsert: the server or ARN the training job logs to from SageMaker (with "
        f"--no-network-isolation)")


@dataclass(frozen=True)
class Target:
    uri: str  # an MLflow tracking URI
    embedded: bool  # the SQLite store in the workdir
    artifact_location: str | None = None  # the embedded store's artifact root (file:// URI)
    experiment: str | None = None  # the experiment to log to (default: the pipeline's name)

    @property
    def display(self) -> str:
        """The URI as printed and stored (mlflow.json, run links): its user information, a
        password or token, is ``***`` (``training_entry.contract.redact``)."""
        return redact(self.uri)

    @property
    def is_server(self) -> bool:
        return self.uri.startswith(("http://", "https://")) or self.is_arn

    @property
    def is_arn(self) -> bool:
        return is_tracking_arn(self.uri)

    def ui_command(self) -> str:
        """The one command that opens the MLflow UI on these runs."""
        if self.embedded:  # each experiment holds its artifact location: the store is enough
            return f"{mlflow_command()} ui --backend-store-uri {shlex.quote(self.uri)}"
        if self.is_arn:
            return (f"aws sagemaker create-presigned-mlflow-tracking-server-url "
                    f"--tracking-server-name {self.uri.rsplit('/', 1)[-1]}")
        if self.is_server:
            return f"open {self.display}"
        return f"{mlflow_command()} ui --backend-store-uri {shlex.quote(self.uri)}"

    def experiment_link(self, experiment_id: str) -> str:
        """The experiment's runs table, in MLflow 3's machine-learning view: its UI otherwise
        opens on GenAI pages (Traces), where no run of ours shows."""
        if self.is_arn:
            return f"{self.uri} experiment {experiment_id}"
        base = self.display.rstrip("/") if self.is_server else UI_DEFAULT
        return f"{base}/#/experiments/{quote(str(experiment_id))}/runs?{UI_RUNS_VIEW}"

    def run_link(self, experiment_id: str, run_id: str) -> str:
        """The run's page in the MLflow UI (the embedded store: once `mlflow ui` serves it)."""
        if self.is_arn:  # its UI opens through a presigned URL (ui_command), not a fixed link
            return f"{self.uri} experiment {experiment_id} run {run_id}"
        base = self.display.rstrip("/") if self.is_server else UI_DEFAULT
        return f"{base}/#/experiments/{quote(str(experiment_id))}/runs/{quote(run_id)}"


def is_tracking_arn(uri: str) -> bool:
    return uri.startswith(ARN_PREFIX) and any(f":{s}/" in uri for s in ARN_SERVICES)


def resolve(flag: str | None, workdir: Path, environ: Mapping[str, str] = os.environ,
            definition: Mapping | None = None) -> Target | None:
    """The target, or None when tracking is off. ``definition``: the one run, whose
    ``MlflowConfig`` (SDK v3) names a target of its own."""
    if flag is None and environ.get(SWITCH_ENV_VAR, "").strip().lower() == OFF:
        return None
    if flag is None:
        configured = from_definition(definition)
        if configured is not None:
            return configured
    uri = flag if flag is not None else environ.get(ENV_VAR) or None
    if uri is not None and uri.strip().lower() == OFF:
        return None
    if uri is None:
        return embedded(workdir)
    return Target(uri=uri.strip(), embedded=False)


def from_definition(definition: Mapping | None) -> Target | None:
    """The target an SDK v3 definition's ``MlflowConfig`` names, or None without one. Refused
    in one line, before any step, where this machine cannot log to it."""
    config = (definition or {}).get(DEFINITION_CONFIG)
    if not isinstance(config, Mapping) or not config.get(DEFINITION_ARN):
        return None
    arn, experiment = config[DEFINITION_ARN], config.get(DEFINITION_EXPERIMENT)
    fix = f"or pass --tracking-uri URL|{OFF} to log elsewhere or not at all"
    if not isinstance(arn, str) or not isinstance(experiment, (str, type(None))):
        raise UserError(f"the definition's {DEFINITION_CONFIG} is {dict(config)}: a pipeline variable where "
                        f"trainpipe reads a fixed ARN and experiment name; {fix}")
    if not is_tracking_arn(arn):
        raise UserError(f"the definition's {DEFINITION_CONFIG}.{DEFINITION_ARN} {arn!r} is not a SageMaker "
                        f"MLflow tracking server ARN; {fix}")
    if importlib.util.find_spec(ARN_PLUGIN_MODULE) is None:
        raise UserError(f"the definition's {DEFINITION_CONFIG} logs to the SageMaker MLflow tracking server "
                        f"{arn}, which this machine reaches only through the {ARN_PLUGIN} plugin (not "
                        f"installed) and AWS credentials: pip install {ARN_PLUGIN}, {fix}")
    return Target(uri=arn, embedded=False, experiment=experiment or None)


def mlflow_command() -> str:
    """``mlflow`` where it is on PATH, else the one installed beside this Python (the project's
    venv, not activated: ``.venv/bin/trainpipe`` runs without it on PATH)."""
    if shutil.which("mlflow"):
        return "mlflow"
    beside = Path(sys.executable).parent / "mlflow"
    return shlex.quote(str(beside)) if beside.is_file() else f"{shlex.quote(sys.executable)} -m mlflow"


def embedded(workdir: Path) -> Target:
    workdir = Path(workdir).resolve()
    return Target(uri=f"sqlite:///{workdir / EMBEDDED_DB}", embedded=True,
                  artifact_location=(workdir / EMBEDDED_ARTIFACTS).as_uri())
