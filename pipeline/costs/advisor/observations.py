"""Measured training runs, from the executions trainpipe recorded: local ``execution.json``
files under a workdir, and (given credentials) the SageMaker jobs of a pipeline's executions.

An observation is one training job's steady state: the median over its epochs after the
first (which traces the graph) of the metric line's ``step_seconds``, ``step_spread_seconds``
and ``cpu_seconds_per_step`` (``training_entry.contract.METRIC_KEYS``), with its layout,
per-worker batch, parameter count, gradient tensor count, the machine it ran on and its
distribution strategy. Runs of different strategies are never fitted together (``group``):
an allreduce step and an asynchronous parameter-server step cost different things.

Each observation also names its workload (``WorkloadId``): the model architecture as the job
resolved it, the data's kind and the input's shape. A step's cost is the model's on its
input, so runs of different workloads are never fitted together either (``advise`` picks one).
A local run's data kind and shape come from the processing manifest the training job read
(the run's ``manifest`` channel, in the workdir's store); a SageMaker job's from its
hyperparameters where they decide it.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

from pipeline.costs.advisor.model import Layout
from pipeline.definition import parameters as P
from pipeline.local.hosts.tf_config import MULTI_WORKER_MIRRORED_ENABLED, PARAMETER_SERVER_ENABLED
from processing.contract import IMAGE_RECORDS_RESIZED
from training_entry.contract import (
    ARCH_AUTO,
    ARCH_CUSTOM,
    ARCH_MLP,
    ARCH_SMALL_CNN,
    DEFAULT_AUGMENTATION,
    HP_AUGMENTATION,
    HP_BATCH_SIZE,
    HP_DISTRIBUTION,
    HP_EPOCHS,
    HP_FP16_ALLREDUCE,
    HP_IMAGE_SIZE,
    HP_MIXED_PRECISION,
    HP_MODEL_ARCHITECTURE,
    HP_MODEL_FILE,
    HP_STEPS_PER_EXECUTION,
    HP_TORCH_STRATEGY,
    IMAGE_ARCHITECTURES,
    METRIC_KEYS,
    STRATEGIES,
    STRATEGY_HOROVOD,
    STRATEGY_MIRRORED,
    STRATEGY_PARAMETER_SERVER,
    TABLE_ARCHITECTURES,
    image_size_for,
)
from training_entry.input.records import KIND_IMAGE, KIND_TABLE, manifest_name

# SageMaker metric names the entrypoint's line is read into (one definition: the contract).
STEP_TIME, STEP_SPREAD, CPU_TIME = "step_time", "step_spread", "cpu_time"
PARAMETERS, TENSORS = "parameters", "tensors"
assert {STEP_TIME, STEP_SPREAD, CPU_TIME, PARAMETERS, TENSORS} <= set(METRIC_KEYS)


UNKNOWN = "?"
# The store ``run --local`` keeps its s3:// objects in, under the workdir: <bucket>/<key>.
STORE_DIR = "store"
MANIFEST_CHANNEL = "manifest"  # the training job's channel holding the processing manifests
TRAIN_CHANNEL = "train"
PYTORCH_ENGINE = "pytorch"  # WorkloadId.engine's first word for the PyTorch room
TENSORFLOW_ENGINE = "tensorflow"  # the word --workload takes for the TensorFlow room (engine "")


@dataclass(frozen=True)
class WorkloadId:
    """What a training step's cost depends on besides the layout: the model architecture (as
    the job resolved ``auto``), the data's kind and the shape of one input. ``?`` where the
    record does not say (runs recorded before the advisor read it)."""

    architecture: str = UNKNOWN
    kind: str = UNKNOWN
    shape: str = UNKNOWN  # "64 features", "32x32x3"
    # "" for the TensorFlow room; "pytorch <strategy>" for the PyTorch room (-p Framework=pytorch),
    # whose step costs differ from TensorFlow's for the same network: never fitted together.
    engine: str = ""

    @property
    def label(self) -> str:
        if self == WorkloadId():
            return "unknown workload (recorded without its model and data)"
        what = {KIND_TABLE: "table", KIND_IMAGE: "images"}.get(self.kind, "data of unknown kind")
        return f"{self.architecture} on {what} {self.shape}" + (f" ({self.engine})" if self.engine else "")

    def matches(self, text: str) -> bool:
        """Whether ``--workload TEXT`` names it: every word is a word of its label (its
        architecture, kind or shape, its room), so "mlp 6 features" does not pick 64 features, and
        "tensorflow" tells the TensorFlow room's run from the PyTorch room's of the same network."""
        words = text.lower().replace(",", " ").split()
        own = {*self.label.replace("(", " ").replace(")", " ").lower().split(), self.architecture, self.kind,
               self.shape, *(() if self.engine else (TENSORFLOW_ENGINE,))}
        return bool(words) and all(w in own for w in words)


def resolve_workload(hps: dict, manifest: dict | None) -> WorkloadId:
    """The workload of a job from its hyperparameters and, where known, its train manifest
    (``training_entry.input.records.Manifest``'s JSON). ``auto`` resolves as the job does
    (``training_entry.model.architectures.resolve``): the user's model file, else mlp for a
    table, small_cnn for images."""
    architecture = str(_hp(hps, HP_MODEL_ARCHITECTURE, ARCH_AUTO))
    has_file = bool(_hp(hps, HP_MODEL_FILE, ""))
    kind = (manifest or {}).get("kind")
    if kind not in (KIND_TABLE, KIND_IMAGE):
        kind = (KIND_TABLE if architecture in TABLE_ARCHITECTURES
                else KIND_IMAGE if architecture in IMAGE_ARCHITECTURES else None)
    if architecture == ARCH_AUTO:
        architecture = (ARCH_CUSTOM if has_file else ARCH_MLP if kind == KIND_TABLE
                        else ARCH_SMALL_CNN if kind == KIND_IMAGE else UNKNOWN)
    if kind == KIND_IMAGE:
        size = _hp(hps, HP_IMAGE_SIZE, None)
        if size not in (None, ""):
            size = image_size_for(architecture, int(size))  # 0: the architecture's own
        shape = f"{int(size)}x{int(size)}x3" if size not in (None, "") else UNKNOWN
    elif kind == KIND_TABLE and manifest:
        columns = manifest.get("columns")
        shape = f"{len(columns) if columns else int(manifest.get('num_features', 0))} features"
    else:
        shape = UNKNOWN
    strategy = _hp(hps, HP_TORCH_STRATEGY, None)  # only the PyTorch room takes it
    return WorkloadId(architecture, kind or UNKNOWN, shape, f"{PYTORCH_ENGINE} {strategy}" if strategy else "")


@dataclass(frozen=True)
class Observation:
    source: str  # execution id / job name
    layout: Layout
    batch: int  # per worker
    step_seconds: float
    cpu_seconds: float | None  # per step, rank 0's process
    parameters: int
    fp16_allreduce: bool
    instance_type: str
    local: bool
    cores: int | None  # the machine's, for local runs
    epochs_used: int
    # Gradient tensors Horovod reduces per step (the model's trainable variables); 1 where the
    # run predates the metric: the gradients then count as one fused tensor.
    tensors: int = 1
    # Half the mean absolute difference of two of its steps (s); 0 where the run predates
    # the metric (no wait for the slowest rank is modelled from it).
    step_spread: float = 0.0
    # Training steps per call into the graph (StepsPerExecution); 1 where the run predates the
    # parameter (every step was a call). A step's fixed cost depends on it.
    steps_per_execution: int = 1
    # How the workers shared the training (build setting --distribution); horovod where the
    # run predates the setting.
    strategy: str = STRATEGY_HOROVOD
    # What the whole job measured (a local run's cost record: wall seconds, start-up and model
    # save included, and its CO2e); None where not recorded (cloud jobs, older records).
    job_seconds: float | None = None
    epochs: int | None = None  # the job's Epochs (its wall time less theirs: start-up and save)
    co2e_kg: float | None = None
    # The model and data it trained (never fitted with another's); when it started (ISO,
    # sortable: the latest workload is the default), and its train split's records.
    workload: WorkloadId = WorkloadId()
    started: str = ""
    train_records: int | None = None
    # Its train channel's s3:// URI (a local run's records sit in the workdir's store), its
    # augmentation and whether it trained in mixed precision: what a GPU type's input and
    # compute ceilings depend on (``gpus.py``).
    train_uri: str | None = None
    augmentation: str = DEFAULT_AUGMENTATION
    mixed_precision: bool = False
    # Whether processing stored its images at the training size (ImageRecords=resized); runs
    # before the parameter kept the files.
    resized_records: bool = False

    @property
    def throughput(self) -> float:
        if self.strategy == STRATEGY_PARAMETER_SERVER:
            # ParameterServer: the chief times the steps of every worker, each one worker's batch.
            return self.batch / self.step_seconds
        return self.layout.workers * self.batch / self.step_seconds

    @property
    def platform(self) -> str:
        return "local" if self.local else self.instance_type

    @property
    def group(self) -> str:
        """The runs one model is fitted on: the platform's, and the strategy's beside
        Horovod's (whose groups keep the platform's bare name)."""
        return group_name(self.platform, self.strategy)


def group_name(platform: str, strategy: str) -> str:
    return platform if strategy == STRATEGY_HOROVOD else f"{platform} --distribution {strategy}"


def why_not_modelled(runs: list[Observation]) -> str | None:
    """Why a group's runs cannot be fitted by the step model, or None. The model is a
    synchronous allreduce step's (Horovod's and MultiWorkerMirrored's alike); an asynchronous
    parameter-server step has no allreduce and no wait for the slowest worker, but a round
    trip to the servers and their bandwidth, which it does not describe."""
    if runs and runs[0].strategy == STRATEGY_PARAMETER_SERVER:
        best = max(runs, key=lambda r: r.throughput)
        return (f"measured, not modelled (the step model is synchronous allreduce's): best "
                f"{best.throughput:.0f} samples/s ({best.source}, {best.layout})")
    return None


def strategy_of(hps: dict) -> str:
    """The job's strategy as recorded in its hyperparameters: the entrypoint's own, else
    the flags the SageMaker SDK sets from the estimator's ``distribution``, else Horovod."""
    named = _hp(hps, HP_DISTRIBUTION, None)
    if named in STRATEGIES:
        return named
    if _truthy(_hp(hps, PARAMETER_SERVER_ENABLED, False)):
        return STRATEGY_PARAMETER_SERVER
    if _truthy(_hp(hps, MULTI_WORKER_MIRRORED_ENABLED, False)):
        return STRATEGY_MIRRORED
    return STRATEGY_HOROVOD


def steady(series: list[float], skip: int = 1) -> tuple[float | None, int]:
    """Median of the values after the first ``skip`` (all of them if there are no more)."""
    values = series[skip:] or series
    return (statistics.median(values) if values else None), len(values)


def _series(job_dir: str | None, final: dict, name: str) -> list[float]:
    if job_dir:
        path = Path(job_dir) / "metrics.json"
        try:
            points = json.loads(path.read_text()).get(name) or []
            if points:
                return [float(p["value"]) for p in points]
        except (OSError, ValueError):
            pass
    return [float(final[name])] if name in final else []


def _hp(hps: dict, name: str, default):
    """A hyperparameter as SageMaker passes them (JSON-encoded strings), or ``default``."""
    if name not in hps:
        return default
    try:
        return json.loads(hps[name])
    except (TypeError, ValueError):
        return hps[name]


def _truthy(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _manifest_channel(properties: dict, name: str = MANIFEST_CHANNEL) -> str | None:
    for channel in properties.get("InputDataConfig") or []:
        if channel.get("ChannelName") == name:
            return ((channel.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
    return None


def store_path(workdir: Path, uri: str) -> Path | None:
    """Where ``run --local`` keeps the object or prefix ``uri`` in the workdir's store."""
    if not uri.startswith("s3://"):
        return None
    bucket, _, key = uri[len("s3://"):].partition("/")
    return Path(workdir) / STORE_DIR / bucket / key.strip("/")


def local_manifest(workdir: Path | None, properties: dict) -> dict | None:
    """The train manifest a local training job read, from the workdir's store; None where it
    is gone (a cleaned store) or the record predates it."""
    uri = _manifest_channel(properties)
    folder = store_path(workdir, uri) if workdir is not None and uri else None
    if folder is None:
        return None
    path = folder / manifest_name("train")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def training_steps(doc: dict) -> list[dict]:
    """An execution's training steps, and each trial of a Tuning step (``--tune``) as one: every
    trial is a training job with the advisor's metrics, on the cores its slot had."""
    from pipeline.local.jobs.tuning.hyperparameter_tuning import TRIALS_FILE

    found = []
    for step in doc.get("steps") or []:
        if step.get("type") != "Tuning" or not step.get("job_dir"):
            found.append(step)
            continue
        try:
            trials = json.loads((Path(step["job_dir"]) / TRIALS_FILE).read_text())
        except (OSError, ValueError):
            continue
        machine = (step.get("cost") or {}).get("machine") or {}
        for trial in trials:
            described = trial.get("description") or {}
            found.append({
                "name": f"{step['name']}/{trial['name']}", "type": "Training", "job_dir": trial.get("job_dir"),
                "status": "Succeeded" if trial.get("status") == "Completed" else trial.get("status"),
                "metrics": {m["MetricName"]: m["Value"] for m in described.get("FinalMetricDataList", [])},
                "properties": described, "start": described.get("TrainingStartTime"),
                "cost": {"machine": {**machine, "cores": len(trial.get("cpus") or []) or machine.get("cores")},
                         "seconds": trial.get("seconds")},
            })
    return found


def from_execution(doc: dict, workdir: Path | None = None) -> list[Observation]:
    """The training steps of one local ``execution.json`` that have the advisor's metrics
    (``workdir``: where its store is, for the workload's manifest)."""
    found = []
    params = doc.get("parameters") or {}
    for step in training_steps(doc):
        if step.get("type") != "Training" or step.get("status") != "Succeeded" or step.get("cache_hit"):
            continue
        final = step.get("metrics") or {}
        step_series = _series(step.get("job_dir"), final, STEP_TIME)
        if not step_series or PARAMETERS not in final:
            continue
        step_seconds, used = steady(step_series)
        cpu, _ = steady(_series(step.get("job_dir"), final, CPU_TIME))
        spread, _ = steady(_series(step.get("job_dir"), final, STEP_SPREAD))
        cost = step.get("cost") or {}
        machine = cost.get("machine") or {}
        properties = step.get("properties") or {}
        hps = properties.get("HyperParameters") or {}
        manifest = local_manifest(workdir, properties)
        records = manifest.get("total_records") if manifest else None
        found.append(Observation(
            source=f"{doc.get('execution_id')}/{step['name']}",
            layout=Layout(int(params.get(P.TRAINING_INSTANCE_COUNT, 1)), int(params.get(P.PROCESSES_PER_HOST, 1) or 1)),
            batch=int(_hp(hps, HP_BATCH_SIZE, params.get(P.BATCH_SIZE, 32))),
            step_seconds=step_seconds, cpu_seconds=cpu, parameters=int(final[PARAMETERS]),
            fp16_allreduce=_truthy(_hp(hps, HP_FP16_ALLREDUCE, False)),
            instance_type=str(params.get(P.TRAINING_INSTANCE_TYPE, cost.get("instance_type", "local"))),
            local=True, cores=int(machine.get("cores") or os.cpu_count() or 1), epochs_used=used,
            tensors=int(final.get(TENSORS, 1)), step_spread=spread or 0.0,
            steps_per_execution=int(_hp(hps, HP_STEPS_PER_EXECUTION, 1)), strategy=strategy_of(hps),
            job_seconds=_number(cost.get("seconds")), co2e_kg=_number((cost.get("energy") or {}).get("co2e_kg")),
            epochs=int(_hp(hps, HP_EPOCHS, params.get(P.EPOCHS, 0)) or 0) or None,
            workload=resolve_workload(hps, manifest), started=str(step.get("start") or doc.get("start") or ""),
            train_records=int(records) if isinstance(records, int | float) else None,
            train_uri=_manifest_channel(properties, TRAIN_CHANNEL),
            augmentation=str(_hp(hps, HP_AUGMENTATION, DEFAULT_AUGMENTATION)),
            mixed_precision=str(_hp(hps, HP_MIXED_PRECISION, "off")) not in ("off", "", "None"),
            resized_records=params.get(P.IMAGE_RECORDS) == IMAGE_RECORDS_RESIZED,
        ))
    return found


def _when(value) -> str:
    """A start time as sortable ISO text (boto3 gives a datetime, a record a string)."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value or "")


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def local_observations(workdir: Path) -> tuple[list[Observation], list[str]]:
    """Every usable training run under ``<workdir>/runs``; and why others were skipped."""
    observations, skipped = [], []
    for path in sorted(Path(workdir).glob("runs/*/execution.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            skipped.append(f"{path}: unreadable ({error})")
            continue
        got = from_execution(doc, workdir)
        if not got:
            skipped.append(f"{path.parent.name}: no succeeded training step with step_seconds and "
                           "model_parameters metrics (cached, failed, or recorded before they existed)")
        observations += got
    return observations, skipped


def from_training_job(described: dict) -> Observation | None:
    """A SageMaker training job (DescribeTrainingJob): its final metric values (SageMaker keeps
    the last epoch's, a steady one when there were two or more epochs)."""
    final = {m["MetricName"]: float(m["Value"]) for m in described.get("FinalMetricDataList") or []}
    if STEP_TIME not in final or PARAMETERS not in final:
        return None
    hps = described.get("HyperParameters") or {}
    resources = described.get("ResourceConfig") or {}
    ppn = _hp(hps, "sagemaker_mpi_num_of_processes_per_host", 1)
    return Observation(
        source=described["TrainingJobName"],
        layout=Layout(int(resources.get("InstanceCount", 1)), int(ppn or 1)),
        batch=int(_hp(hps, HP_BATCH_SIZE, 32)),
        step_seconds=final[STEP_TIME], cpu_seconds=final.get(CPU_TIME), parameters=int(final[PARAMETERS]),
        fp16_allreduce=_truthy(_hp(hps, HP_FP16_ALLREDUCE, False)),
        instance_type=resources.get("InstanceType", "?"), local=False, cores=None, epochs_used=1,
        tensors=int(final.get(TENSORS, 1)), step_spread=final.get(STEP_SPREAD, 0.0),
        steps_per_execution=int(_hp(hps, HP_STEPS_PER_EXECUTION, 1)), strategy=strategy_of(hps),
        workload=resolve_workload(hps, None), started=_when(described.get("TrainingStartTime")),
        augmentation=str(_hp(hps, HP_AUGMENTATION, DEFAULT_AUGMENTATION)),
        mixed_precision=str(_hp(hps, HP_MIXED_PRECISION, "off")) not in ("off", "", "None"),
    )


def cloud_observations(sagemaker, pipeline_name: str, limit: int = 50) -> tuple[list[Observation], list[str]]:
    """The training jobs of the pipeline's latest executions."""
    from pipeline.cloud import executions as ex

    observations, skipped = [], []
    for summary in ex.list_executions(sagemaker, pipeline_name, limit):
        for step in ex.StepLister(sagemaker).steps(summary["PipelineExecutionArn"]) or []:
            arn = ((step.get("Metadata") or {}).get("TrainingJob") or {}).get("Arn")
            if not arn or step.get("StepStatus") != "Succeeded":
                continue
            described = sagemaker.describe_training_job(TrainingJobName=arn.rsplit("/", 1)[-1])
            found = from_training_job(described)
            if found is None:
                skipped.append(f"{described['TrainingJobName']}: no step_time/parameters metrics")
            else:
                observations.append(found)
    return observations, skipped
