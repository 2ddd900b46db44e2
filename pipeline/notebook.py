"""What ``notebooks/run_pipeline.ipynb`` shows, as functions: the DAG as a picture, training
curves per epoch, the evaluation report (with its confusion matrix and, for images, a grid of
the misclassified test images) and the registered model. The notebook only calls
these (and the runner or the cloud commands); no pipeline logic lives in it.

Everything is read from the definition JSON and from the files a run leaves behind, so the
same pictures come out of a local run and, for the DAG, of what SageMaker was given.
matplotlib is imported only when a picture is drawn (``trainpipe definition`` must not need it),
and figures are made without pyplot: no global state, and a notebook shows each one once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evaluation import report

# The DAG picture: notebook_dag.py (re-exported here, where the notebook and the tests call it).
from pipeline.figures import confusion_matrix_figure, misclassified_figure  # noqa: F401 (the notebook's API)
from pipeline.notebook_dag import STEP_COLOURS, dag_edges, dag_figure, dag_picture, reduced_edges  # noqa: F401
from pipeline.workdir import resolve_workdir
from training_entry.contract import METRIC_LINE_PREFIX, parse_metric_line

_EPOCH = re.compile(rf"{METRIC_LINE_PREFIX}\s+epoch=(\d+)")


# --- Training curves ----------------------------------------------------------------------------


def training_curves(lines: Iterable[str]) -> dict[str, list[tuple[int, float]]]:
    """{metric name: [(epoch, value), ...]} from training log lines: the per-epoch line rank 0
    prints, read with the same regexes SageMaker applies (``METRIC_DEFINITIONS``). A repeated
    epoch (a resumed job) keeps its last value."""
    curves: dict[str, dict[int, float]] = {}
    for line in lines:
        epoch = _EPOCH.search(line)
        if not epoch:
            continue
        for name, value in parse_metric_line(line).items():
            curves.setdefault(name, {})[int(epoch.group(1))] = value
    return {name: sorted(points.items()) for name, points in curves.items()}


def _execution_document(execution_dir: str | Path) -> dict:
    path = Path(execution_dir) / "execution.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a local execution folder (no execution.json)")
    return json.loads(path.read_text())


def training_log(execution_dir: str | Path) -> Path:
    """The training job's log of a local execution (``<job folder>/job.log``); of a tuned one
    (``--tune``), the best trial's."""
    document = _execution_document(execution_dir)
    for step in document.get("steps", []):
        if step.get("type") == "Training" and step.get("job_dir"):
            log = Path(step["job_dir"]) / "job.log"
            if log.exists():
                return log
        best = ((step.get("properties") or {}).get("BestTrainingJob") or {}).get("TrainingJobName")
        if step.get("type") == "Tuning" and best:
            log = Path(execution_dir) / "jobs" / best / "job.log"
            if log.exists():
                return log
    raise FileNotFoundError(f"{execution_dir}: no training job log in this execution")


def tuning_trials(execution_dir: str | Path) -> list[dict]:
    """A local execution's Tuning step's trials, in the order they started: name, tuned
    values, objective (None without one), stopped early, best."""
    for step in _execution_document(execution_dir).get("steps", []):
        properties = step.get("properties") or {}
        if step.get("type") != "Tuning" or not properties.get("TrainingJobSummaries"):
            continue
        best = (properties.get("BestTrainingJob") or {}).get("TrainingJobName")
        return [{"trial": s["TrainingJobName"], "values": s.get("TunedHyperParameters", {}),
                 "objective": (s.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("Value"),
                 "metric": (s.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("MetricName"),
                 "stopped_early": s.get("TrainingJobStatus") == "Stopped",
                 "best": s["TrainingJobName"] == best}
                for s in sorted(properties["TrainingJobSummaries"], key=lambda s: s["TrainingJobName"])]
    raise FileNotFoundError(f"{execution_dir}: no tuning step in this execution (run with --tune N)")


def plot_tuning(trials: list[dict]):
    """The objective per trial of a tuned execution (``tuning_trials``, ``RunResults.trials``),
    as a matplotlib Figure: one bar per trial in the order they ran, the early-stopped ones
    hatched, the best one labelled."""
    from matplotlib.figure import Figure

    if not trials:
        raise ValueError("no trials: the execution was not tuned (trainpipe run --local --tune N)")
    figure = Figure(figsize=(max(5, 0.6 * len(trials) + 2), 3.5))
    axes = figure.subplots()
    numbers = range(1, len(trials) + 1)
    values = [t["objective"] or 0.0 for t in trials]
    bars = axes.bar(numbers, values, color=["tab:green" if t["best"] else "tab:blue" for t in trials])
    for bar, trial in zip(bars, trials, strict=True):
        if trial["stopped_early"]:
            bar.set_hatch("//")
            bar.set_alpha(0.6)
        if trial["best"]:
            axes.annotate("best", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom")
    axes.set_xticks(list(numbers))
    axes.set_xlabel("trial (hatched: stopped early)")
    axes.set_ylabel(next((t["metric"] for t in trials if t["metric"]), "objective"))
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return figure


def plot_training_curves(execution_dir: str | Path | None = None, lines: Iterable[str] | None = None):
    """Loss and accuracy per epoch (train and validation), as a matplotlib Figure; from a local
    execution folder, or from log lines."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if lines is None:
        if execution_dir is None:
            raise ValueError("pass an execution folder or the log lines")
        lines = training_log(execution_dir).read_text(errors="replace").splitlines()
    curves = training_curves(lines)
    if not curves:
        raise ValueError("no per-epoch metric lines in the training log")
    figure = Figure(figsize=(10, 3.5))
    loss_axes, accuracy_axes = figure.subplots(1, 2)
    for axes, kind in ((loss_axes, "loss"), (accuracy_axes, "accuracy")):
        for name in (kind, f"val_{kind}"):
            if name in curves:
                epochs, values = zip(*curves[name], strict=True)
                axes.plot(epochs, values, marker="o", label=name)
        axes.set_xlabel("epoch")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel(kind)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    return figure


# --- Results ------------------------------------------------------------------------------------


def execution_summary(execution_dir: str | Path) -> list[dict]:
    """One row per step of a local execution: name, type, status, seconds, detail."""
    document = _execution_document(execution_dir)
    return [
        {
            "step": step["name"], "type": step["type"], "status": step["status"],
            "seconds": step.get("duration_seconds"),
            "detail": step.get("detail") or step.get("failure_reason") or "",
        }
        for step in document.get("steps", [])
    ]


@dataclass
class RunResults:
    """What the notebook shows after a run, wherever it ran."""

    status: str
    steps: list[dict]  # step, type, status, detail
    training_log: list[str]  # the lines the per-epoch curves are read from
    evaluation: dict | None  # evaluation.json (evaluation/report.py's shape)
    models: list[dict]  # the model packages of the group, newest first
    # Image runs: (report entry, encoded image) of each misclassified test image saved beside
    # evaluation.json, most confident mistake first.
    misclassified: list[tuple[dict, bytes]] = field(default_factory=list)
    # The execution's MLflow run (pipeline/tracking): its link in the MLflow UI, where logged.
    mlflow_run: str | None = None
    # A tuned run's (--tune) trials (tuning_trials); empty when the run was not tuned.
    trials: list[dict] = field(default_factory=list)

    @property
    def accuracy(self) -> float | None:
        if not self.evaluation:
            return None
        return float(report.read_json_path(self.evaluation, report.ACCURACY_JSON_PATH))


def workdir(flag: str | Path | None = None) -> str:
    """The workdir local runs use, by the command line's rules (``pipeline/workdir.py``), after
    printing which one and why: a notebook started in ``notebooks/`` keeps its runs where
    ``trainpipe models`` and ``trainpipe executions --local`` look from the repository root."""
    chosen = resolve_workdir(flag)
    print(chosen.line())  # stdout: Jupyter shows stderr as a warning
    return str(chosen.path)


def latest_local_execution(workdir: str | Path) -> Path:
    """The folder of the newest execution ``trainpipe run --local --workdir WORKDIR`` made."""
    runs = sorted(Path(workdir).glob("runs/*/execution.json"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise FileNotFoundError(f"{workdir}: no local executions (run `trainpipe run --local`)")
    return runs[-1].parent


def _evaluation_uri(properties: dict) -> str | None:
    for output in (properties.get("ProcessingOutputConfig") or {}).get("Outputs", []):
        if output.get("OutputName") == report.OUTPUT_NAME:
            return output["S3Output"]["S3Uri"].rstrip("/") + "/" + report.REPORT_FILE
    return None


def local_results(workdir: str | Path, execution_dir: str | Path | None = None) -> RunResults:
    """The results of a local execution (default: the newest in ``workdir``)."""
    from pipeline.local.store.registry import Registry
    from pipeline.local.store.storage import LocalStorage

    execution_dir = Path(execution_dir or latest_local_execution(workdir))
    document = _execution_document(execution_dir)
    storage = LocalStorage(Path(workdir) / "store")
    evaluation, misclassified = None, []
    for step in document.get("steps", []):
        uri = _evaluation_uri(step.get("properties") or {})
        if uri and storage.exists(uri):
            evaluation = json.loads(storage.read_bytes(uri))
            misclassified = [(entry, storage.read_bytes(_beside(uri, entry["file"])))
                             for entry in evaluation.get("misclassified", [])]
    try:
        lines = training_log(execution_dir).read_text(errors="replace").splitlines()
    except FileNotFoundError:
        lines = []
    packages = Registry(Path(workdir) / "registry.sqlite").list()
    models = [
        {"group": p.group, "version": p.version, "status": p.approval_status,
         "accuracy": _accuracy_of(p.metrics), "model": p.model_data_url, "created": p.created}
        for p in sorted(packages, key=lambda p: (p.created, p.version), reverse=True)
    ]
    from pipeline.tracking.logger import last_link

    try:
        trials = tuning_trials(execution_dir)
    except FileNotFoundError:
        trials = []
    return RunResults(document.get("status", "?"), execution_summary(execution_dir), lines,
                      evaluation, models, misclassified, mlflow_run=last_link(execution_dir), trials=trials)


def _beside(report_uri: str, relative: str) -> str:
    return report_uri.rsplit("/", 1)[0] + "/" + relative


def _accuracy_of(metrics: dict | None) -> float | None:
    try:
        return float(report.read_json_path(metrics or {}, report.ACCURACY_JSON_PATH))
    except (KeyError, TypeError, ValueError):
        return None


# --- Results of a run: SageMaker ------------------------------------------------------------------

# SageMaker: where a training job's container output goes in CloudWatch Logs.
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"


def cloud_results(clients, execution_arn: str, model_package_group: str) -> RunResults:
    """The results of a SageMaker execution: the step list (ListPipelineExecutionSteps), the
    training job's metric lines from CloudWatch Logs (read with the same regexes), the
    evaluation report from S3 and the group's model packages."""
    from pipeline.cloud.aws import aws_errors
    from pipeline.cloud.executions import StepLister, describe_execution
    from pipeline.cloud.uploads import split_s3_uri
    from pipeline.definition.build import STEP_EVALUATE

    sagemaker = clients.sagemaker
    described = describe_execution(sagemaker, execution_arn)
    lister = StepLister(sagemaker)
    steps = lister.steps(execution_arn) or []
    summary = [
        {"step": s["StepName"], "type": next(iter(s.get("Metadata") or {"?": 0})),
         "status": s.get("StepStatus"), "seconds": None, "detail": s.get("FailureReason") or ""}
        for s in steps
    ]
    training_job = evaluation_job = None
    for step in steps:
        metadata = step.get("Metadata") or {}
        if "TrainingJob" in metadata:
            training_job = metadata["TrainingJob"]["Arn"].rsplit("/", 1)[-1]
        if "ProcessingJob" in metadata and step["StepName"] == STEP_EVALUATE:
            evaluation_job = metadata["ProcessingJob"]["Arn"].rsplit("/", 1)[-1]
    lines: list[str] = []
    if training_job:
        with aws_errors("reading the training job's log"):
            pages = clients.client("logs").get_paginator("filter_log_events").paginate(
                logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix=training_job + "/",
                filterPattern=f'"{METRIC_LINE_PREFIX}"',
            )
            lines = [event["message"] for page in pages for event in page.get("events", [])]
    evaluation, misclassified = None, []
    if evaluation_job:
        with aws_errors("reading the evaluation report"):
            job = sagemaker.describe_processing_job(ProcessingJobName=evaluation_job)
            uri = _evaluation_uri(job)
            if uri:
                bucket, key = split_s3_uri(uri)
                evaluation = json.loads(clients.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                for entry in evaluation.get("misclassified", []):
                    bucket, key = split_s3_uri(_beside(uri, entry["file"]))
                    misclassified.append((entry, clients.s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
    with aws_errors(f"listing model package group {model_package_group!r}"):
        packages = sagemaker.list_model_packages(
            ModelPackageGroupName=model_package_group, SortBy="CreationTime", SortOrder="Descending",
        ).get("ModelPackageSummaryList", [])
    models = [
        {"group": p.get("ModelPackageGroupName"), "version": p.get("ModelPackageVersion"),
         "status": p.get("ModelApprovalStatus"), "model": p.get("ModelPackageArn"),
         "created": str(p.get("CreationTime", ""))}
        for p in packages
    ]
    return RunResults(described["PipelineExecutionStatus"], summary, lines, evaluation, models, misclassified)


def latest_cloud_results(stack_name: str | None = None) -> RunResults:
    """``cloud_results`` of the pipeline's newest execution; the pipeline, region and model
    package group are found as ``trainpipe start`` finds them (variables, then the stack)."""
    from pipeline.cloud.account import given_sources, resolve_target
    from pipeline.cloud.executions import latest_execution_arn
    from pipeline.cloud.stack import stack_name as stack_name_from
    from pipeline.errors import UserError
    from pipeline.settings import from_environment

    target = resolve_target(from_environment(), given_sources({}), stack_name=stack_name_from(stack_name))
    settings = target.settings
    arn = latest_execution_arn(target.clients.sagemaker, settings.pipeline_name)
    if arn is None:
        raise UserError(f"pipeline {settings.pipeline_name!r} has no executions in {settings.region}")
    return cloud_results(target.clients, arn, settings.model_package_group)

