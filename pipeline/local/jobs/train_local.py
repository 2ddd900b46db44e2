"""``trainpipe train --local``: one training job of any SageMaker-compatible script, under the
same container contract as the pipeline's TrainModel step (Pipe, ShardedByS3Key, several hosts
and MPI included).

:func:`run_training_job` packs the code, puts local channel data in the store, builds the
CreateTrainingJob request of the shape the definition's Training step has, refuses a bad
request before anything starts, and runs it (``training_job.py``).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pipeline.definition.bundles import SOURCEDIR_ARCHIVE
from pipeline.errors import UserError
from pipeline.local.hosts.mpi import mpirun_path
from pipeline.local.hosts.processes import stop_signals_as_interrupt
from pipeline.local.jobs import contract
from pipeline.local.jobs.failures import JobFailure
from pipeline.local.jobs.lifecycle import ENVIRONMENTS, JobResult, JobStopped
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.store.channels import (
    FULLY_REPLICATED,
    Channel,
    StoredObject,
    assign,
    list_objects,
)
from pipeline.local.store.storage import S3Uri, Storage, join_uri
from pipeline.settings import Settings
from training_entry.contract import CHECKPOINT_DIR, DISTRIBUTIONS, HP_DISTRIBUTION, INPUT_MODES


@dataclass(frozen=True)
class TrainSpec:
    """What the user asked for, one field per ``train --local`` flag (messages name them)."""

    entry_point: str
    source_dir: str | None = None
    instances: int = 1
    processes_per_host: int | None = None  # set: the MPI launch (Horovod)
    channels: list[str] = field(default_factory=list)  # NAME=LOCATION[:Mode[:Distribution]]
    hyperparameters: dict[str, str] = field(default_factory=dict)  # raw values, JSON-encoded here
    env: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)  # name -> regex
    instance_type: str = "local"
    job_name: str | None = None
    output_path: str | None = None
    checkpoint_uri: str | None = None
    mpi_options: str = ""
    max_run: int = 24 * 3600


def parse_channel(text: str) -> tuple[str, str, str, str]:
    """``NAME=LOCATION[:Mode[:Distribution]]`` -> (name, location, mode, distribution).
    Mode and distribution are peeled off the end, so s3:// locations keep their colon."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise UserError(f"--channel {text!r}: expected NAME=PATH_OR_URI[:Mode[:Distribution]]")
    mode, distribution = "File", FULLY_REPLICATED
    location = rest
    head, _, last = location.rpartition(":")
    if head and last in DISTRIBUTIONS:
        distribution, location = last, head
        head, _, last = location.rpartition(":")
        if head and last in INPUT_MODES:
            mode, location = last, head
        else:
            raise UserError(f"--channel {text!r}: a Distribution needs a Mode before it "
                            f"(NAME=LOCATION:Mode:Distribution)")
    elif head and last in INPUT_MODES:
        mode, location = last, head
    elif head and not location.startswith("s3://") and last and "/" not in last:
        raise UserError(f"--channel {text!r}: {last!r} is neither an input mode "
                        f"({', '.join(INPUT_MODES)}) nor a distribution ({', '.join(DISTRIBUTIONS)})")
    if not re.fullmatch(r"[A-Za-z0-9\.\-_]+", name):
        raise UserError(f"--channel {text!r}: channel names use letters, digits, '.', '-' and '_'")
    return name, location, mode, distribution


def encode_hyperparameter(raw: str) -> str:
    """SageMaker (Framework estimators): every value is JSON-encoded into a string."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return json.dumps(value)


def sourcedir_archive(entry_point: Path, source_dir: Path | None) -> bytes:
    buffer = io.BytesIO()
    # Links are followed, as the SDK packs a source_dir: the job's extractor refuses links.
    with tarfile.open(fileobj=buffer, mode="w:gz", dereference=True) as tar:
        if source_dir is None:
            tar.add(entry_point, arcname=entry_point.name)
        else:
            for path in sorted(source_dir.rglob("*")):
                if "__pycache__" in path.parts or path.is_dir():
                    continue
                tar.add(path, arcname=path.relative_to(source_dir).as_posix())
    return buffer.getvalue()


def default_job_name(entry: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9-]+", "-", Path(entry).stem).strip("-") or "job"
    return f"{stem[:40]}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def run_training_job(spec: TrainSpec, settings: Settings, storage: Storage, workdir: Path,
                     *, echo: bool = True) -> JobResult:
    """Build, check and run the job in ``<workdir>/jobs/<job>``. A bad request (flags,
    channels, code location) is a UserError before anything is created: no job folder, no
    object uploaded. A job that runs and fails or is stopped (Ctrl-C, SIGTERM) is a result."""
    job = spec.job_name or default_job_name(spec.entry_point)
    request, uploads = build_training_request(spec, settings, storage, job)
    job_dir = Path(workdir) / "jobs" / job
    if job_dir.exists():
        raise UserError(f"--job-name {job}: {job_dir} already exists (a job of that name ran "
                        f"before); choose another name or remove the folder")
    for upload in uploads:
        upload(storage)
    # Job environments are cached in the workdir, shared with `run --local`'s jobs.
    training = TrainingJob(request, job, storage, job_dir, region=settings.region, echo=echo,
                           environments=Path(workdir) / ENVIRONMENTS)
    # Everything was checked above; check() again now the local data is in the store.
    try:
        training.check()
    except JobFailure as failure:
        training.sink.close()
        raise UserError(failure.reason) from None
    except UserError:
        training.sink.close()
        raise
    with stop_signals_as_interrupt():
        try:
            return training.run()
        except JobStopped as stopped:
            return stopped.result


def _local_files(path: Path) -> list[Path]:
    """What ``Storage.put_tree`` / ``put_file`` would upload from ``path``."""
    if path.is_file():
        return [path]
    return [p for p in sorted(path.rglob("*")) if p.is_file() and not p.is_symlink()]


def build_training_request(spec: TrainSpec, settings: Settings, storage: Storage,
                           job: str) -> tuple[dict, list]:
    """A CreateTrainingJob request of the shape the definition's Training step has, and the
    uploads (callables taking the storage) that must happen before it runs. Everything is
    checked here and nothing is written: the store is only read (s3:// channels)."""
    entry, source_dir, program = _entry_point(spec)
    if spec.instances < 1:
        raise UserError(f"--instances {spec.instances}: must be at least 1")
    if spec.processes_per_host is not None and spec.processes_per_host < 1:
        raise UserError(f"--processes-per-host {spec.processes_per_host}: must be at least 1")
    base = f"s3://{settings.bucket}/{settings.prefix}/train-local/{job}"
    submit = join_uri(base, "source", SOURCEDIR_ARCHIVE)
    archive = sourcedir_archive(entry, source_dir)
    uploads = [lambda store: store.put_bytes(archive, submit)]
    channels = [_channel(text, spec.instances, base, storage, uploads) for text in spec.channels]
    hyperparameters = _hyperparameters(spec, settings, job, program, submit)
    metrics = _metric_definitions(spec)
    output_path = spec.output_path or f"s3://{settings.bucket}/{settings.prefix}/training-local"
    S3Uri.parse(output_path, "--output-path")
    request = {
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "local",
                                   "MetricDefinitions": metrics},
        "OutputDataConfig": {"S3OutputPath": output_path},
        "ResourceConfig": {"InstanceCount": spec.instances, "InstanceType": spec.instance_type,
                           "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": spec.max_run},
        "RoleArn": settings.role_arn,
        "InputDataConfig": channels,
        "HyperParameters": hyperparameters,
        "Environment": dict(spec.env),
    }
    if spec.checkpoint_uri:
        S3Uri.parse(spec.checkpoint_uri, "--checkpoint-uri")
        request["CheckpointConfig"] = {"S3Uri": spec.checkpoint_uri, "LocalPath": CHECKPOINT_DIR}
    return request, uploads


def _entry_point(spec: TrainSpec) -> tuple[Path, Path | None, str]:
    """(entry point file, source dir, sagemaker_program: the entry point's path in the code)."""
    source_dir = Path(spec.source_dir) if spec.source_dir else None
    if source_dir is not None and not source_dir.is_dir():
        raise UserError(f"--source-dir {source_dir}: not a directory")
    entry = Path(spec.entry_point)
    if source_dir is not None and not entry.is_absolute() and (source_dir / entry).exists():
        entry = source_dir / entry
    if not entry.is_file():
        raise UserError(f"--entry-point {spec.entry_point}: no such file")
    if source_dir is None:
        return entry, None, entry.name
    try:
        program = entry.resolve().relative_to(source_dir.resolve()).as_posix()
    except ValueError:
        raise UserError(f"--entry-point {entry} is not inside --source-dir {source_dir}") from None
    return entry, source_dir, program


def _channel(text: str, instances: int, base: str, storage: Storage, uploads: list) -> dict:
    """One ``--channel`` as the request's channel; a local location adds its upload."""
    name, location, mode, distribution = parse_channel(text)
    if location.startswith("s3://"):
        S3Uri.parse(location, f"--channel {name}")
        uri = location
    else:
        path = Path(location)
        if not path.exists():
            raise UserError(f"--channel {name}: {location} is neither an s3:// URI nor an existing path")
        uri = join_uri(base, "input", name) + "/"
        if path.is_dir():
            uploads.append(lambda store, path=path, uri=uri: store.put_tree(path, uri))
        else:
            uploads.append(lambda store, path=path, uri=uri: store.put_file(path, join_uri(uri, path.name)))
    channel = {"ChannelName": name, "InputMode": mode,
               "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                               "S3DataDistributionType": distribution}}}
    parsed = Channel.from_training_request(channel, mode)
    parsed.check()
    # What the job would refuse (an empty channel, too few objects to shard), refused
    # now, before any upload: local files counted as the objects they would become.
    if location.startswith("s3://"):
        objects = list_objects(storage, uri, parsed.label)
    else:
        files = _local_files(Path(location))
        if not files:
            raise UserError(f"--channel {name}: {location} holds no files to train on")
        objects = [StoredObject(join_uri(uri, f.name), f.name) for f in files]
    assign(objects, distribution, instances, parsed.label, uri)
    return channel


def _hyperparameters(spec: TrainSpec, settings: Settings, job: str, program: str, submit: str) -> dict:
    """The user's hyperparameters JSON-encoded, and the framework's (sagemaker_*) added."""
    hyperparameters = {k: encode_hyperparameter(v) for k, v in spec.hyperparameters.items()}
    reserved = [k for k in hyperparameters if k.startswith(contract.FRAMEWORK_PREFIX)]
    if reserved:
        raise UserError(f"--hyperparameter {', '.join(reserved)}: names starting with "
                        f"{contract.FRAMEWORK_PREFIX} are set by trainpipe")
    hyperparameters.update({
        "sagemaker_program": json.dumps(program),
        "sagemaker_submit_directory": json.dumps(submit),
        "sagemaker_container_log_level": "20",
        "sagemaker_job_name": json.dumps(job),
        "sagemaker_region": json.dumps(settings.region),
    })
    if settings.distribution != "horovod":
        if spec.processes_per_host is not None:
            raise UserError(f"--processes-per-host with --distribution {settings.distribution}: "
                            f"SageMaker starts one process per host for it (no mpirun); drop it")
        # SageMaker: what the SDK sends for distribution={"parameter_server" |
        # "multi_worker_mirrored_strategy": {"enabled": True}}; the strategy's name for the script.
        hyperparameters.update({
            ("sagemaker_parameter_server_enabled" if settings.distribution == "parameter_server"
             else "sagemaker_multi_worker_mirrored_strategy_enabled"): "true",
            HP_DISTRIBUTION: json.dumps(settings.distribution),
        })
    if spec.processes_per_host is not None:
        if mpirun_path() is None:
            raise UserError("--processes-per-host needs Open MPI's mpirun, which is not on PATH "
                            "(apt-get install openmpi-bin)")
        # Horovod: what the SDK sends for distribution={"mpi": {...}}.
        hyperparameters.update({
            "sagemaker_mpi_enabled": "true",
            "sagemaker_mpi_num_of_processes_per_host": str(spec.processes_per_host),
            "sagemaker_mpi_custom_mpi_options": json.dumps(spec.mpi_options),
        })
    return hyperparameters


def _metric_definitions(spec: TrainSpec) -> list[dict]:
    metrics = [{"Name": k, "Regex": v} for k, v in spec.metrics.items()]
    for metric in metrics:
        try:
            re.compile(metric["Regex"])
        except re.error as error:
            raise UserError(f"--metric {metric['Name']}: bad regex: {error}") from None
    return metrics
