"""What an execution logs to MLflow, read from trainpipe's own records (no MLflow import).

The live run and ``trainpipe track sync`` both log from here, so a run logged late is the run
that would have been logged live: the parent run from ``execution.json`` (and the run
folder's ``definition.json``), each step's child run from its step record, its job folder's
``metrics.json`` (every epoch's value, as the metric definitions read them), the
``evaluation.json`` its outputs hold, and the local registry's model package.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pipeline.definition.parameters import TUNED_PARAMETERS
from pipeline.local.execution import (
    EXECUTING,
    FAILED,
    NOT_EXECUTED,
    STOPPED,
    SUCCEEDED,
    ExecutionRecord,
    StepRecord,
)
from pipeline.local.store.storage import Storage, StorageError, join_uri
from training_entry import contract

# MLflow's run statuses, for trainpipe's (SageMaker's words).
RUN_STATUS = {SUCCEEDED: "FINISHED", FAILED: "FAILED", STOPPED: "KILLED", EXECUTING: "RUNNING"}
# The tags trainpipe sets; ``mlflow.*`` ones are MLflow's own (the UI shows them).
TAG_EXECUTION = contract.TRACKING_TAG_EXECUTION
TAG_PIPELINE = "trainpipe.pipeline"
TAG_DIGEST = "trainpipe.definition_digest"
TAG_VERSION = "trainpipe.version"
TAG_RUN_DIR = "trainpipe.run_dir"
TAG_STEP = contract.TRACKING_TAG_STEP
TAG_STEP_TYPE = "trainpipe.step_type"
TAG_JOB = contract.TRACKING_TAG_JOB
TAG_CACHE_HIT = "trainpipe.cache_hit_from"
TAG_FAILURE = "trainpipe.failure_reason"
TAG_DETAIL = "trainpipe.detail"
TAG_OUTCOME = "trainpipe.condition_outcome"
TAG_MODEL_PACKAGE = "sagemaker.model_package_arn"
TAG_GIT_COMMIT = "mlflow.source.git.commit"
TAG_RUN_NAME = "mlflow.runName"
TAG_NOTE = "mlflow.note.content"  # the run's description in the UI
TAG_PARENT = contract.TRACKING_TAG_PARENT
# MLflow's limits (its SQL stores refuse longer values).
PARAM_VALUE_CHARS = 6000
TAG_VALUE_CHARS = 5000
REGISTER_TYPE = "RegisterModel"
TUNING_TYPE = "Tuning"
TAG_TRIAL = "trainpipe.trial"
# MLflow 3's experiment kind (its UI's "custom model development": runs, not GenAI traces).
TAG_EXPERIMENT_KIND, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
TAG_TUNED = "trainpipe.tuned"  # "true" on a tuned execution's run (its model is the best trial's)
TAG_BEST_TRIAL = "trainpipe.best_trial"
# A trial's status (SageMaker's training job words) as an MLflow run's.
TRIAL_STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Stopped": "KILLED"}


@dataclass
class RunPayload:
    """One MLflow run: what to create, log and end it with."""
    name: str
    start_ms: int | None
    end_ms: int | None
    status: str  # MLflow's RUNNING, FINISHED, FAILED, KILLED
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    # (key, value, timestamp in ms, step)
    metrics: list[tuple[str, float, int, int]] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)  # artifact path -> content
    model: ModelToLog | None = None
    children: list[RunPayload] = field(default_factory=list)  # a Tuning step's trials
    # What the execution's own run gains from this step: the evaluation's metrics (the runs
    # compare by accuracy, not cost alone), a Tuning step's best trial's values and tuned tag.
    to_parent: RunPayload | None = None


@dataclass(frozen=True)
class ModelToLog:
    """The registered model package: its archive, and the MLflow registered model it becomes
    (named as the model package group, one MLflow version per package)."""
    group: str
    package_version: int
    package_arn: str
    approval_status: str
    model_data_url: str
    metrics: dict | None


def millis(iso: str | None) -> int | None:
    return None if not iso else int(datetime.fromisoformat(iso).timestamp() * 1000)


def _text(value, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _params(values: dict) -> dict[str, str]:
    # A secret's name (db_password, ApiToken) logs ***, a URI its host without credentials.
    return {str(k)[:250]: _text(contract.loggable_value(str(k), _text(v, 10**6)), PARAM_VALUE_CHARS)
            for k, v in values.items()}


# --- the parent run ------------------------------------------------------------------------
def definition_digest(run_dir: Path) -> str | None:
    """sha256 of the definition the execution ran, as canonical JSON (key order ignored)."""
    try:
        definition = json.loads((Path(run_dir) / "definition.json").read_text())
    except (OSError, ValueError):
        return None
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()


@cache
def git_commit() -> str | None:
    """The commit of the trainpipe checkout that ran it (None outside a git checkout)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parents[2],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def trainpipe_version() -> str:
    try:
        return version("trainpipe")
    except PackageNotFoundError:
        return "unknown"


def tuned_away(run_dir: Path) -> set[str]:
    """A tuned definition's parameters that no step reads (--tune's BatchSize, BaseLearningRate
    and WarmupEpochs: the tuning job chooses their hyperparameters). Their defaults are not what
    trained the model, so the execution's run shows the best trial's values instead."""
    try:
        definition = json.loads((Path(run_dir) / "definition.json").read_text())
        steps = definition.get("Steps") or []
        declared = [p["Name"] for p in definition.get("Parameters") or []]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return set()
    if not any(isinstance(step, dict) and step.get("Type") == TUNING_TYPE for step in steps):
        return set()
    read = set(re.findall(r'"Parameters\.([A-Za-z0-9_-]+)"', json.dumps(steps)))
    return {name for name in declared if name not in read}


def parent_run(record: ExecutionRecord) -> RunPayload:
    tags = {TAG_RUN_NAME: record.execution_id, TAG_EXECUTION: record.execution_id,
            TAG_PIPELINE: record.pipeline_name, TAG_VERSION: trainpipe_version(),
            TAG_RUN_DIR: record.run_dir}
    digest = definition_digest(Path(record.run_dir))
    if digest:
        tags[TAG_DIGEST] = digest
    commit = git_commit()
    if commit:
        tags[TAG_GIT_COMMIT] = commit
    unused = tuned_away(Path(record.run_dir))
    if unused:
        tags[TAG_TUNED] = "true"
    return RunPayload(name=record.execution_id, start_ms=millis(record.start),
                      end_ms=millis(record.end), status=RUN_STATUS.get(record.status, "RUNNING"),
                      params=_params({k: v for k, v in record.parameters.items() if k not in unused}), tags=tags)


def parent_end(record: ExecutionRecord) -> RunPayload:
    """What the parent run ends with: its status, the reason, and the execution's totals."""
    payload = parent_run(record)
    end = millis(record.end) or 0
    from pipeline.costs import accounting

    totals = accounting.totals(record.job_costs())
    for key in ("cost_usd", "energy_kwh", "co2e_kg", "instance_hours"):
        if totals.get(key) is not None:
            payload.metrics.append((key, float(totals[key]), end, 0))
    if record.failure_reason:
        payload.tags[TAG_FAILURE] = _text(record.failure_reason, TAG_VALUE_CHARS)
        payload.tags[TAG_NOTE] = _text(f"{record.status}: {record.failure_reason}", TAG_VALUE_CHARS)
    return payload


# --- a step's child run ----------------------------------------------------------------------
def loggable(step: StepRecord) -> bool:
    """Steps that ran (or were served from the cache) have a child run; NotExecuted ones do
    not, and one still Executing is logged when it ends."""
    return step.status not in (NOT_EXECUTED, EXECUTING)


def step_run(record: ExecutionRecord, step: StepRecord, storage: Storage | None,
             registry_path: Path | None = None) -> RunPayload:
    payload = RunPayload(name=step.name, start_ms=millis(step.start), end_ms=millis(step.end),
                         status=RUN_STATUS.get(step.status, "FAILED"))
    payload.tags.update({TAG_RUN_NAME: step.name, TAG_STEP: step.name, TAG_STEP_TYPE: step.type,
                         TAG_EXECUTION: record.execution_id, TAG_PIPELINE: record.pipeline_name})
    if step.job_name:
        payload.tags[TAG_JOB] = step.job_name
    if step.cache_hit:
        payload.tags[TAG_CACHE_HIT] = step.cache_hit.get("execution_id", "")
    if step.detail:
        payload.tags[TAG_DETAIL] = _text(step.detail, TAG_VALUE_CHARS)
    if step.failure_reason and step.status != SUCCEEDED:
        payload.tags[TAG_FAILURE] = _text(step.failure_reason, TAG_VALUE_CHARS)
        payload.tags[TAG_NOTE] = _text(f"{step.status}: {step.failure_reason}", TAG_VALUE_CHARS)
    end = payload.end_ms or payload.start_ms or 0
    if step.type == "Training":
        _training(record, step, payload, end)
    elif step.type == "Processing":
        _processing(step, payload, storage, end)
    elif step.type == TUNING_TYPE:
        _tuning(record, step, payload, end)
    elif step.type == "Condition":
        outcome = (step.properties or {}).get("Outcome")
        if outcome is not None:
            payload.tags[TAG_OUTCOME] = str(bool(outcome)).lower()
            payload.metrics.append(("outcome", float(bool(outcome)), end, 0))
    elif step.type == REGISTER_TYPE and step.status == SUCCEEDED:
        payload.model = _model_of(step, registry_path)
        if payload.model is not None:
            payload.tags[TAG_MODEL_PACKAGE] = payload.model.package_arn
            payload.params.update(_params({"ModelPackageGroupName": payload.model.group,
                                           "ModelApprovalStatus": payload.model.approval_status}))
    if step.cost:
        _cost_metrics(step.cost, payload, end)
    if step.duration is not None:
        payload.metrics.append(("wall_seconds", float(step.duration), end, 0))
    return payload


def hyperparameters_of(request: dict) -> dict[str, str]:
    """A training job's hyperparameters as params, with its instance type and count."""
    hyperparameters = {}
    for key, value in (request.get("HyperParameters") or {}).items():
        # SageMaker: hyperparameters travel JSON-encoded ('"0.01"'); the param is the value.
        try:
            decoded = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            decoded = value
        hyperparameters[key] = decoded if isinstance(decoded, str) else json.dumps(decoded)
    resources = request.get("ResourceConfig") or {}
    for key in ("InstanceType", "InstanceCount"):
        if key in resources:
            hyperparameters.setdefault(key, str(resources[key]))
    return hyperparameters


def _training(record: ExecutionRecord, step: StepRecord, payload: RunPayload, end: int) -> None:
    payload.params.update(_params(hyperparameters_of(step.properties or {})))
    series = epoch_series(record, step)
    for name, points in series.items():
        for index, point in enumerate(points, 1):
            when = millis(point.get("timestamp")) or end
            payload.metrics.append((name, float(point["value"]), when, index))
    if not series:  # no per-epoch record (a cache hit whose job folder is gone): the finals
        payload.metrics += [(k, float(v), end, 0) for k, v in step.metrics.items()]


def job_folder(record: ExecutionRecord, step: StepRecord) -> Path | None:
    """The job's folder; for a cache hit, the job's in the execution that ran it."""
    if step.job_dir:
        return Path(step.job_dir)
    if step.cache_hit and step.job_name:
        return Path(record.run_dir).parent / step.cache_hit["execution_id"] / "jobs" / step.job_name
    return None


def epoch_series(record: ExecutionRecord, step: StepRecord) -> dict[str, list[dict]]:
    return chief_series(job_folder(record, step))


def chief_series(folder: Path | None) -> dict[str, list[dict]]:
    """A job folder's metric definitions' values in order, from the chief only (rank 0 on the
    first host, or the first host where the job has no MPI ranks): every rank of a user's
    script may print, and one value per epoch is the chief's."""
    try:
        series = json.loads((folder / "metrics.json").read_text()) if folder else {}
    except (OSError, ValueError):
        return {}
    out = {}
    for name, points in series.items():
        sources = [p.get("source") for p in points]
        chief = next((s for s in sources if s and s.endswith("rank 0")), sources[0] if sources else None)
        chosen = [p for p in points if p.get("source") == chief] or points
        if chosen:
            out[name] = chosen
    return out


def _tuning(record: ExecutionRecord, step: StepRecord, payload: RunPayload, end: int) -> None:
    """The tuning step's run: its objective's best value; each trial a run nested under it
    (the trial's hyperparameters, every epoch's metrics, its objective, how it ended), read
    from the tuning job's ``trials.json`` (pipeline/local/jobs/tuning/hyperparameter_tuning.py)."""
    from pipeline.local.jobs.tuning.hyperparameter_tuning import TRIALS_FILE

    payload.metrics += [(k, float(v), end, 0) for k, v in step.metrics.items()]
    best = (step.properties or {}).get("BestTrainingJob") or {}
    if best.get("TrainingJobName"):
        payload.tags[TAG_BEST_TRIAL] = best["TrainingJobName"]
        # The execution's run: what trained its model, named as the parameters the user knows.
        names = {hyperparameter: parameter for parameter, hyperparameter in TUNED_PARAMETERS.items()}
        values = {names.get(k, k): v for k, v in (best.get("TunedHyperParameters") or {}).items()}
        logged = set(record.parameters) - tuned_away(Path(record.run_dir))  # MLflow params never change
        payload.to_parent = RunPayload(
            name=record.execution_id, start_ms=None, end_ms=None, status="RUNNING",
            params=_params({k: v for k, v in values.items() if k not in logged}),
            tags={TAG_TUNED: "true", TAG_BEST_TRIAL: best["TrainingJobName"]},
            metrics=[(k, float(v), end, 0) for k, v in step.metrics.items()])
    if step.cache_hit:
        # Its trials ran, and were logged, in the execution it reused (a cached re-run logs
        # nothing twice): the tag names it.
        return
    folder = job_folder(record, step)
    try:
        trials = json.loads((folder / TRIALS_FILE).read_text()) if folder else []
    except (OSError, ValueError):
        trials = []
    for trial in trials:
        described = trial.get("description") or {}
        # Every hyperparameter the trial trained with (static and tuned), as a training step's run.
        child = RunPayload(name=trial["name"], start_ms=millis(described.get("TrainingStartTime")),
                           end_ms=millis(described.get("TrainingEndTime")),
                           status=TRIAL_STATUS.get(trial.get("status"), "FAILED"),
                           params=_params({**hyperparameters_of(described), **(trial.get("values") or {})}))
        child.tags.update({TAG_RUN_NAME: trial["name"], TAG_TRIAL: str(trial.get("number", "")),
                           TAG_JOB: trial["name"], TAG_STEP_TYPE: "TuningTrial"})
        reason = trial.get("stop_reason") or described.get("FailureReason")
        if reason:
            child.tags[TAG_FAILURE if child.status == "FAILED" else TAG_DETAIL] = _text(reason, TAG_VALUE_CHARS)
        trial_end = child.end_ms or end
        for name, points in chief_series(Path(trial["job_dir"]) if trial.get("job_dir") else None).items():
            for index, point in enumerate(points, 1):
                child.metrics.append((name, float(point["value"]), millis(point.get("timestamp")) or trial_end, index))
        if trial.get("objective") is not None:
            child.metrics.append(("objective", float(trial["objective"]), trial_end, 0))
        if trial.get("seconds") is not None:
            child.metrics.append(("wall_seconds", float(trial["seconds"]), trial_end, 0))
        payload.children.append(child)


def _cost_metrics(cost: dict, payload: RunPayload, end: int) -> None:
    figures = {"cost_usd": cost.get("cost_usd"), "instance_hours": cost.get("instance_hours"),
               "energy_kwh": (cost.get("energy") or {}).get("kwh"),
               "co2e_kg": (cost.get("energy") or {}).get("co2e_kg")}
    payload.metrics += [(k, float(v), end, 0) for k, v in figures.items() if v is not None]


def evaluation_uris(properties: dict) -> list[str]:
    """Where a processing job's outputs would hold ``evaluation.json``."""
    from evaluation.report import REPORT_FILE

    outputs = (properties or {}).get("ProcessingOutputConfig", {}).get("Outputs", [])
    return [join_uri(o["S3Output"]["S3Uri"], REPORT_FILE) for o in outputs
            if o.get("S3Output", {}).get("S3Uri")]


def _processing(step: StepRecord, payload: RunPayload, storage: Storage | None, end: int) -> None:
    payload.metrics += [(k, float(v), end, 0) for k, v in step.metrics.items()]
    if storage is None or step.status != SUCCEEDED:
        return
    for uri in evaluation_uris(step.properties):
        try:
            if not storage.exists(uri):
                continue
            report = json.loads(storage.read_bytes(uri))
        except (StorageError, ValueError):
            continue
        evaluation_payload(report, uri, storage, payload, end)
        return


def evaluation_payload(report: dict, uri: str, storage: Storage, payload: RunPayload, end: int) -> None:
    """``evaluation.json``'s metrics, the report itself, the confusion matrix (JSON and a
    picture) and the misclassified images with their grid."""
    from evaluation.report import REPORT_FILE

    found = [(name, float(metric["value"]), end, 0) for name, metric in (report.get("metrics") or {}).items()
             if isinstance(metric, dict) and isinstance(metric.get("value"), (int, float))]
    payload.metrics += found
    # The execution's run too, as test_<metric>: its experiment's runs then compare by accuracy.
    payload.to_parent = RunPayload(name="", start_ms=None, end_ms=None, status="RUNNING",
                                   metrics=[(f"test_{name}", value, when, at) for name, value, when, at in found])
    if isinstance(report.get("records"), int):
        payload.metrics.append(("test_records", float(report["records"]), end, 0))
    payload.artifacts[f"evaluation/{REPORT_FILE}"] = json.dumps(report, indent=2).encode()
    if report.get("confusion_matrix"):
        names = report.get("class_names") or [str(i) for i in range(len(report["confusion_matrix"]))]
        payload.artifacts["evaluation/confusion_matrix.json"] = json.dumps(
            {"class_names": names, "matrix": report["confusion_matrix"],
             "rows": "true label", "columns": "predicted label"}, indent=2).encode()
        picture = _figure_png("confusion_matrix_figure", report)
        if picture:
            payload.artifacts["evaluation/confusion_matrix.png"] = picture
    shown = []
    base = uri.rsplit("/", 1)[0]
    for entry in report.get("misclassified") or []:
        relative = entry.get("file")
        if not relative:
            continue
        try:
            data = storage.read_bytes(join_uri(base, relative))
        except StorageError:
            continue
        payload.artifacts[f"evaluation/{relative}"] = data
        shown.append((entry, data))
    if shown:
        picture = _figure_png("misclassified_figure", shown)
        if picture:
            payload.artifacts["evaluation/misclassified_grid.png"] = picture


def _figure_png(name: str, argument) -> bytes | None:
    """The notebook's own figure (``pipeline/figures.py``: one drawing of each), as PNG; None
    without matplotlib."""
    try:
        import matplotlib  # noqa: F401  (the figures import it when drawn)
    except ImportError:
        return None
    from pipeline import figures

    figure = getattr(figures, name)(argument)  # a pyplot-free Figure: nothing to close
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=100, bbox_inches="tight")
    return out.getvalue()


def _model_of(step: StepRecord, registry_path: Path | None) -> ModelToLog | None:
    from pipeline.local.store.registry import Registry

    arn = (step.properties or {}).get("ModelPackageArn")
    if not arn or registry_path is None or not Path(registry_path).is_file():
        return None
    package = next((p for p in Registry(registry_path).list() if p.arn == arn), None)
    if package is None:
        return None
    return ModelToLog(group=package.group, package_version=package.version, package_arn=package.arn,
                      approval_status=package.approval_status,
                      model_data_url=package.model_data_url, metrics=package.metrics)
