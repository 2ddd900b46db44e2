"""A SageMaker TrainingJob / ProcessingJob request, run as local processes.

The request is the dict the definition's step ``Arguments`` evaluate to (CreateTrainingJob /
CreateProcessingJob shape). Every simulated host (``algo-1`` ... ``algo-N``) gets its own
``/opt/ml`` tree under ``<job dir>/hosts/<host>`` (``contract.py`` writes it); the job's
processes see it through ``SAGEMAKER_BASE_DIR`` and the ``SM_*`` variables.

Training: channels staged per host (``channels.py``), checkpoints restored from
``CheckpointConfig.S3Uri``, the code unpacked from ``sagemaker_submit_directory``, then either
one ``mpirun`` for all ranks (``sagemaker_mpi_enabled``; ``mpi.py``) or one process per host.
At the end: ``model/`` of algo-1 (where rank 0 runs) -> ``<S3OutputPath>/<job>/output/model.tar.gz``,
``output/data`` -> ``output.tar.gz`` beside it, every host's checkpoints -> the checkpoint URI.

Processing: inputs staged into each host's ``LocalPath`` per distribution, then
``ContainerEntrypoint + ContainerArguments`` per host; outputs uploaded on success.

Every process writes to its own log file; a tailer streams the lines to the terminal and the
job's ``job.log`` with ``[algo-K rank R]`` prefixes and applies the job's metric regexes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from evaluation.report import MODEL_ARCHIVE
from pipeline.bundles import SOURCEDIR_ARCHIVE
from pipeline.errors import UserError
from pipeline.local import channels as ch
from pipeline.local import contract, mpi, tuning
from pipeline.local.processes import (
    EXTERNAL_SIGNALS,
    ProcessSet,
    describe_exit,
    new_token,
    signal_name,
)
from pipeline.local.storage import S3Uri, Storage, StorageError, join_uri
from training_entry.contract import CHECKPOINT_DIR, EXIT_MESSAGE_FILE, FAILURE_FILE

# SageMaker: the container's failure reason files and how much of them the job keeps.
TRAINING_FAILURE_FILE = FAILURE_FILE
FAILURE_REASON_LIMIT = 1024
OUTPUT_ARCHIVE = "output.tar.gz"

# Failure types: what SageMaker Pipelines would call the failure, for retry policies.
ALGORITHM_ERROR = "AlgorithmError"  # the script's fault: never retried
INTERNAL_ERROR = "SageMaker.JOB_INTERNAL_ERROR"
RESOURCE_LIMIT = "SageMaker.RESOURCE_LIMIT"
CLIENT_ERROR = "ClientError"  # bad request (channels, code location): never retried

POLL_SECONDS = 0.05
# Every rank must have started (its log file exists) this long after mpirun started; a
# daemon that never came up would otherwise leave mpirun waiting forever.
MPI_LAUNCH_TIMEOUT = 120.0
# Environment variables of the runner that must not leak into a simulated container.
_CONTAINER_ONLY_PREFIXES = ("SM_", "SAGEMAKER_", "TRAINING_JOB_", "PROCESSING_JOB_", "OMPI_", "PMIX_")
_PYTHON_NAMES = re.compile(r"^python(3(\.\d+)?)?$")


class JobFailure(Exception):
    def __init__(self, reason: str, failure_type: str = ALGORITHM_ERROR):
        super().__init__(reason)
        self.reason = reason
        self.failure_type = failure_type


class JobStopped(KeyboardInterrupt):
    """The job was stopped (Ctrl-C / SIGTERM); carries the stopped job's result."""

    def __init__(self, result: JobResult):
        super().__init__("stopped")
        self.result = result


def now_iso(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, timezone.utc).isoformat(timespec="seconds")


def _arn(region: str, account: str, kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:{kind}/{name}"


def account_of(request: dict) -> str:
    """The account in the request's role ARN (arn:aws:iam::<account>:role/...), for ARNs."""
    parts = str(request.get("RoleArn", "")).split(":")
    return parts[4] if len(parts) > 4 and parts[4] else "000000000000"


def base_environment(environ: dict) -> dict:
    """The runner's environment minus anything that belongs to a container of its own.

    TensorFlow's INFO start-up lines (oneDNN, CPU instructions) are hidden unless the user
    set TF_CPP_MIN_LOG_LEVEL: every rank and step prints them, burying the job's own output."""
    env = {
        k: v for k, v in environ.items()
        if not k.startswith(_CONTAINER_ONLY_PREFIXES) and k not in ("PYTHONPATH", "CURRENT_HOST")
    }
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return env


def local_python(argv: list[str]) -> list[str]:
    """The image's ``python3`` is this machine's Python with TensorFlow: the runner's own."""
    if argv and _PYTHON_NAMES.match(Path(argv[0]).name):
        return [sys.executable, *argv[1:]]
    return list(argv)


# --- Logs and metrics ----------------------------------------------------------------------
class Sink:
    """Where a job's prefixed lines go: its log file, and the terminal unless quiet."""

    def __init__(self, log_path: Path, echo: bool = True, stream=None):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by close())
        self.echo = echo
        self.stream = stream
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self.file.write(text + "\n")
            self.file.flush()
            if self.echo:
                stream = self.stream or sys.stdout
                stream.write(text + "\n")
                stream.flush()

    def close(self) -> None:
        self.file.close()


class Metrics:
    """SageMaker: MetricDefinitions regexes applied to every log line; the first group is the
    value (lines where it is not a number are skipped). Every match is kept in order, which for
    a script that prints one line per epoch is the per-epoch series."""

    def __init__(self, definitions: list[dict]):
        self.definitions = [(d["Name"], re.compile(d["Regex"])) for d in definitions or []]
        self.series: dict[str, list[dict]] = {name: [] for name, _ in self.definitions}
        self.lock = threading.Lock()

    def feed(self, line: str, source: str) -> None:
        for name, regex in self.definitions:
            match = regex.search(line)
            if not match:
                continue
            try:
                value = float(match.group(1) if match.groups() else match.group(0))
            except ValueError:
                continue
            with self.lock:
                self.series[name].append({"value": value, "timestamp": now_iso(), "source": source})

    def final(self) -> list[dict]:
        """SageMaker: FinalMetricDataList, the last value of each metric."""
        return [
            {"MetricName": name, "Value": points[-1]["value"], "Timestamp": points[-1]["timestamp"]}
            for name, points in self.series.items() if points
        ]

    def summary(self) -> dict[str, float]:
        return {m["MetricName"]: m["Value"] for m in self.final()}


class LogTailer(threading.Thread):
    """Follows every ``*.log`` in a folder, emitting whole lines with a prefix per file."""

    def __init__(self, directory: Path, prefix: Callable[[str], str | None], sink: Sink, metrics: Metrics):
        super().__init__(name=f"tail-{directory}", daemon=True)
        self.directory = Path(directory)
        self.prefix = prefix
        self.sink = sink
        self.metrics = metrics
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.tails: dict[str, list[str]] = {}  # file stem -> last lines, for failure reasons
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.drain()
            self.stop_event.wait(0.1)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(5)
        self.drain(final=True)

    def drain(self, final: bool = False) -> None:
        for path in sorted(self.directory.glob("*.log")):
            label = self.prefix(path.stem)
            if label is None:
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets.get(path, 0))
                    data = f.read()
            except OSError:
                continue
            if not data and not (final and self.partial.get(path)):
                continue
            self.offsets[path] = self.offsets.get(path, 0) + len(data)
            data = self.partial.pop(path, b"") + data
            lines = data.split(b"\n")
            rest = lines.pop()
            if rest and final:
                lines.append(rest)
            elif rest:
                self.partial[path] = rest
            for raw in lines:
                text = raw.decode("utf-8", errors="replace").rstrip("\r")
                self.sink.line(f"[{label}] {text}")
                self.metrics.feed(text, label)
                tail = self.tails.setdefault(path.stem, [])
                tail.append(text)
                del tail[:-20]

    def last_line(self, stem: str) -> str | None:
        for text in reversed(self.tails.get(stem, [])):
            if text.strip():
                return text.strip()
        return None


# --- Results ---------------------------------------------------------------------------------
@dataclass
class JobResult:
    name: str
    kind: str  # Training | Processing
    status: str  # Completed | Failed | Stopped
    description: dict  # the Describe*Job-style document: the step's properties
    job_dir: Path
    log: Path
    start: float
    end: float
    failure_reason: str | None = None
    failure_type: str | None = None
    metrics: dict = field(default_factory=dict)  # name -> series

    @property
    def duration(self) -> float:
        return self.end - self.start


def _read_reason(path: Path) -> str | None:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return text[:FAILURE_REASON_LIMIT] or None


class _FailureWatch:
    """The first failure file any host writes (later ones are often ranks being killed)."""

    def __init__(self, files: dict[str, Path]):
        self.files = files
        self.first: tuple[str, str] | None = None  # (host, text)

    def poll(self) -> None:
        if self.first is not None:
            return
        for host, path in self.files.items():
            text = _read_reason(path) if path.exists() else None
            if text:
                self.first = (host, text)
                return


# --- The common lifecycle --------------------------------------------------------------------
class LocalJob:
    kind = "Job"

    def __init__(self, request: dict, name: str, storage: Storage, job_dir: Path, *,
                 region: str = "us-east-1", echo: bool = True, stream=None):
        self.request = request
        self.name = name
        self.storage = storage
        self.job_dir = Path(job_dir)
        self.region = region
        self.account = account_of(request)
        self.log_path = self.job_dir / "job.log"
        self.job_dir.mkdir(parents=True, exist_ok=True)
        (self.job_dir / "request.json").write_text(json.dumps(request, indent=2, sort_keys=True))
        self.sink = Sink(self.log_path, echo=echo, stream=stream)
        self.metrics = Metrics([])
        self.processes = ProcessSet(new_token())
        self.feeders = ch.FeederSet()
        self.logs_dir = self.job_dir / "logs"
        self.logs_dir.mkdir(exist_ok=True)
        self.tailer: LogTailer | None = None
        self.max_runtime = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        self.first_failed = None  # the child that failed first
        self.stopped = False

    def host_dir(self, host: str) -> Path:
        return self.job_dir / "hosts" / host

    def note(self, text: str) -> None:
        self.sink.line(f"[{self.name}] {text}")

    # subclasses: prepare() stages everything, launch() starts processes, outcome() judges,
    # finish() uploads, describe() builds the properties document
    def run(self) -> JobResult:
        start = time.time()
        status, reason, failure_type = "Completed", None, None
        try:
            try:
                self.prepare()
                self.tailer = LogTailer(self.logs_dir, self.log_prefix, self.sink, self.metrics)
                self.tailer.start()
                self.launch()
                self.wait(start)
                self.stop_children()
                self.stop_tailer()  # every line read before the outcome is judged
                self.outcome()
                self.finish()
            except KeyboardInterrupt:
                status, reason = "Stopped", "stopped by the user (Ctrl-C / SIGTERM)"
                self.stop_children()
            except JobFailure as failure:
                status, reason, failure_type = "Failed", failure.reason, failure.failure_type
            except StorageError as error:
                status, reason, failure_type = "Failed", str(error), error.kind or CLIENT_ERROR
            except UserError as error:  # a bad channel, URI or request: before anything ran
                status, reason, failure_type = "Failed", str(error), CLIENT_ERROR
            finally:
                self.stop_children()
                problems = self.feeders.stop()
                for problem in problems:
                    self.note(problem)
                self.stop_tailer()
                self.always()
        except KeyboardInterrupt:
            status, reason = "Stopped", "stopped by the user (Ctrl-C / SIGTERM)"
        end = time.time()
        if reason:
            self.note(f"{status}: {reason}")
        else:
            self.note(f"{status} in {end - start:.1f}s")
        self.sink.close()
        result = JobResult(
            name=self.name, kind=self.kind, status=status,
            description=self.describe(status, reason, start, end),
            job_dir=self.job_dir, log=self.log_path, start=start, end=end,
            failure_reason=reason, failure_type=failure_type, metrics=self.metrics.series,
        )
        (self.job_dir / "metrics.json").write_text(json.dumps(self.metrics.series, indent=2))
        (self.job_dir / "description.json").write_text(json.dumps(result.description, indent=2, default=str))
        if status == "Stopped":
            raise JobStopped(result)
        return result

    def wait(self, start: float) -> None:
        while True:
            self.poll_hook()
            running = self.processes.running()
            if not running:
                failed = [c for c in self.processes.children if c.process.returncode != 0]
                self.first_failed = failed[0] if failed else None
                return
            failed = [c for c in self.processes.finished() if c.process.returncode != 0]
            if failed:
                self.first_failed = failed[0]
                return  # SageMaker: the job fails when any host fails; stop the rest
            if self.max_runtime and time.time() - start > float(self.max_runtime):
                self.stop_children()
                raise JobFailure(
                    f"MaxRuntimeExceeded: the job ran longer than StoppingCondition."
                    f"MaxRuntimeInSeconds={self.max_runtime}", ALGORITHM_ERROR)
            time.sleep(POLL_SECONDS)

    def stop_tailer(self) -> None:
        if self.tailer is not None and not self.tailer.stop_event.is_set():
            self.tailer.stop()

    def stop_children(self) -> None:
        if self.processes.children and not self.stopped:
            self.stopped = True
            self.processes.terminate()

    def spawn(self, label: str, argv: list[str], env: dict, cwd: Path, log: Path):
        try:
            return self.processes.spawn(label, argv, env, cwd, log)
        except FileNotFoundError as error:
            raise JobFailure(f"cannot start {argv[0]}: {error}", CLIENT_ERROR) from error
        except BlockingIOError as error:  # EAGAIN: out of processes
            raise JobFailure(f"cannot start {argv[0]}: {error}", RESOURCE_LIMIT) from error

    def poll_hook(self) -> None:
        pass

    def always(self) -> None:
        pass

    def log_prefix(self, stem: str) -> str | None:
        return stem


def extract_sourcedir(archive: Path, target: Path) -> None:
    """SageMaker: sourcedir.tar.gz is unpacked into /opt/ml/code."""
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")


def pack_directory(directory: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(Path(directory).rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)


# --- Training --------------------------------------------------------------------------------
class TrainingJob(LocalJob):
    kind = "Training"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        req = self.request
        self.metrics = Metrics((req.get("AlgorithmSpecification") or {}).get("MetricDefinitions", []))
        resources = req.get("ResourceConfig") or {}
        self.instance_type = str(resources.get("InstanceType", "local"))
        self.hosts = contract.host_names(int(resources.get("InstanceCount", 1)))
        self.hyperparameters = {k: str(v) for k, v in (req.get("HyperParameters") or {}).items()}
        _, self.framework = contract.split_hyperparameters(
            contract.decode_hyperparameters(self.hyperparameters))
        self.mpi_enabled = bool(self.framework.get("sagemaker_mpi_enabled"))
        # SageMaker: processes per host default to the GPUs; there are none here.
        self.processes_per_host = int(self.framework.get("sagemaker_mpi_num_of_processes_per_host") or 1)
        self.num_processes = self.framework.get("sagemaker_mpi_num_processes")
        self.default_input_mode = (req.get("AlgorithmSpecification") or {}).get("TrainingInputMode", ch.FILE)
        self.channels: list[ch.Channel] = []
        checkpoint = req.get("CheckpointConfig") or {}
        self.checkpoint_uri = checkpoint.get("S3Uri")
        self.checkpoint_local = checkpoint.get("LocalPath") or CHECKPOINT_DIR
        self.output_path = (req.get("OutputDataConfig") or {}).get("S3OutputPath") or ""
        # SageMaker: <S3OutputPath>/<job name>/output/model.tar.gz
        self.output_prefix = join_uri(self.output_path, self.name, "output")
        self.model_uri = join_uri(self.output_prefix, MODEL_ARCHIVE)
        self.rank_count = int(self.num_processes or self.processes_per_host * len(self.hosts))
        self.rank_to_host = mpi.rank_hosts(self.hosts, self.processes_per_host, self.rank_count)
        self.mpi_launch: mpi.MpiLaunch | None = None
        self.launched_at = 0.0
        self.all_ranks_started = False
        self.watch = _FailureWatch({
            h: Path(contract.relocate(TRAINING_FAILURE_FILE, self.host_dir(h))) for h in self.hosts})

    # -- staging --
    def check(self) -> dict[str, list[list[ch.StoredObject]]]:
        """Everything about the request that can be refused before anything starts (bad
        URIs, empty channels, too few objects to shard); each channel's objects per host."""
        self.channels = [ch.Channel.from_training_request(e, self.default_input_mode)
                         for e in self.request.get("InputDataConfig") or []]
        for channel in self.channels:
            channel.check()
        if self.checkpoint_uri:
            S3Uri.parse(self.checkpoint_uri, "CheckpointConfig.S3Uri")
        S3Uri.parse(self.output_path, "OutputDataConfig.S3OutputPath")
        if self.mpi_enabled and mpi.mpirun_path() is None:
            raise JobFailure("sagemaker_mpi_enabled is set but mpirun is not on PATH; install "
                             "Open MPI (apt-get install openmpi-bin)", CLIENT_ERROR)
        shares = {}
        for channel in self.channels:
            objects = ch.list_objects(self.storage, channel.uri, channel.label)
            shares[channel.name] = ch.assign(objects, channel.distribution, len(self.hosts),
                                             channel.label, channel.uri)
        return shares

    def prepare(self) -> None:
        shares = self.check()
        config = {c.name: c.input_data_config() for c in self.channels}
        for index, host in enumerate(self.hosts):
            base = self.host_dir(host)
            contract.write_training_tree(
                base, current_host=host, hosts=self.hosts, instance_type=self.instance_type,
                hyperparameters=self.hyperparameters, input_data_config=config)
            data_dir = base / "input" / "data"
            for channel in self.channels:
                objects = shares[channel.name][index]
                if channel.input_mode == ch.PIPE:
                    files = ch.local_sources(self.storage, objects, self.job_dir / "pipe-cache" / channel.name)
                    self.feeders.add(data_dir, channel, files)
                else:
                    ch.stage_files(self.storage, objects, data_dir / channel.name, channel.input_mode)
                self.note(f"{host}: channel {channel.name} ({channel.input_mode}, "
                          f"{channel.distribution}): {len(objects)} object(s)")
            if self.checkpoint_uri:
                restored = self.storage.get_tree(
                    self.checkpoint_uri, Path(contract.relocate(self.checkpoint_local, base)))
                if restored:
                    self.note(f"{host}: restored {len(restored)} checkpoint file(s) from {self.checkpoint_uri}")
            self.unpack_code(base)

    def unpack_code(self, base: Path) -> None:
        submit = self.framework.get("sagemaker_submit_directory")
        code = base / "code"
        if not submit:
            raise JobFailure("hyperparameter sagemaker_submit_directory is missing: nothing says "
                             "where the code is", CLIENT_ERROR)
        submit = str(submit)
        if submit.startswith("s3://"):
            archive = self.job_dir / "source" / SOURCEDIR_ARCHIVE
            if not archive.exists():
                self.storage.get_file(submit, archive)
            extract_sourcedir(archive, code)
            return
        # SageMaker with network isolation: the code arrives as the `code` channel and the
        # submit directory is a container path inside it.
        local = Path(contract.relocate(submit.removeprefix("file://"), base))
        if local.is_dir():
            ch.copy_tree(local, code)
        elif local.is_file():
            extract_sourcedir(local, code)
        else:
            raise JobFailure(f"sagemaker_submit_directory {submit}: not found "
                             f"(looked at {local})", CLIENT_ERROR)

    def host_environment(self, host: str) -> dict:
        base = self.host_dir(host)
        env = base_environment(dict(os.environ))
        # SageMaker: the platform sets the request's Environment map in the container.
        env.update({k: str(v) for k, v in (self.request.get("Environment") or {}).items()})
        env.update(contract.training_environment(
            base, current_host=host, hosts=self.hosts, instance_type=self.instance_type,
            hyperparameters=self.hyperparameters,
            input_data_config={c.name: c.input_data_config() for c in self.channels},
            job_name=self.name, region=self.region))
        env.update({
            "TRAINING_JOB_ARN": _arn(self.region, self.account, "training-job", self.name),
            # SageMaker: the toolkit puts the code directory on PYTHONPATH.
            "PYTHONPATH": str(base / "code"),
            "PYTHONUNBUFFERED": "1",  # lines reach the log (and the metric regexes) as printed
            "HOROVOD_HOSTNAME": host,  # Horovod: the host grouping Gloo would use
        })
        return env

    def command(self, host: str) -> list[str]:
        base = self.host_dir(host)
        argv = contract.user_command(sys.executable, self.hyperparameters, base)
        entry = argv[1]
        if not entry.endswith(".py"):
            # SageMaker: anything that is not a .py file runs through the shell.
            return ["/bin/sh", "-c", " ".join(["./" + entry, *argv[2:]])]
        if (base / "code" / "setup.py").exists() or (base / "code" / "requirements.txt").exists():
            self.note(f"{host}: setup.py/requirements.txt in the code are not installed locally")
        return argv

    # -- running --
    def launch(self) -> None:
        if self.mpi_enabled:
            custom = str(self.framework.get("sagemaker_mpi_custom_mpi_options") or "")
            # Horovod: every rank of every simulated host shares this machine's cores; the
            # runner's launch defaults (threads per rank, MPI yielding, pinning; see
            # tuning.py) keep them from fighting. What the user set wins.
            fast = tuning.local_launch(
                int(self.rank_count), custom_mpi_options=custom,
                request_env=self.request.get("Environment") or {})
            specs = {}
            for host in self.hosts:
                argv = self.command(host)
                specs[host] = {
                    "env": fast.apply_env(self.host_environment(host)),
                    "cwd": str(self.host_dir(host) / "code"),
                    "argv": tuning.shim_argv(argv) if fast.pin else argv,
                    "log": str(self.logs_dir / f"{host}.rank-{{rank}}.log"),
                }
            launch = mpi.prepare(
                self.job_dir / "mpi", self.hosts, self.processes_per_host, specs,
                num_processes=int(self.num_processes) if self.num_processes else None,
                local_options=fast.mpirun_options, extra_options=custom)
            self.note("mpirun: " + " ".join(launch.command))
            self.mpi_launch = launch
            self.launched_at = time.monotonic()
            env = base_environment(dict(os.environ))
            self.spawn("mpirun", launch.command, env, self.job_dir, self.logs_dir / "mpirun.log")
        else:
            for host in self.hosts:
                self.spawn(host, self.command(host), self.host_environment(host),
                           self.host_dir(host) / "code", self.logs_dir / f"{host}.log")

    def log_prefix(self, stem: str) -> str | None:
        match = re.fullmatch(r"(.+)\.rank-(\d+)", stem)
        if match:
            return f"{match.group(1)} rank {match.group(2)}"
        return stem

    def poll_hook(self) -> None:
        self.watch.poll()
        launch = self.mpi_launch
        if launch is not None and not self.all_ranks_started:
            started = len(list(self.logs_dir.glob("*.rank-*.log")))
            self.all_ranks_started = started >= launch.num_processes
            if not self.all_ranks_started and time.monotonic() - self.launched_at > MPI_LAUNCH_TIMEOUT:
                raise JobFailure(
                    f"InternalServerError: mpirun started {started} of {launch.num_processes} "
                    f"ranks in {MPI_LAUNCH_TIMEOUT:.0f}s (see {self.logs_dir / 'mpirun.log'})",
                    INTERNAL_ERROR)

    def outcome(self) -> None:
        self.watch.poll()
        if self.first_failed is None:
            return
        first_file = self.watch.first
        if self.mpi_enabled:
            output = (self.logs_dir / "mpirun.log").read_text(errors="replace")
            exit_info = mpi.first_failure(output, self.rank_to_host)
            if exit_info is None:
                code = self.first_failed.process.returncode
                detail = first_file[1] if first_file else (
                    self.tailer.last_line("mpirun") if self.tailer else None)
                raise JobFailure(
                    f"InternalServerError: mpirun {describe_exit(code)}"
                    + (f": {detail}" if detail else ""), INTERNAL_ERROR if first_file is None else ALGORITHM_ERROR)
            who = f"rank {exit_info.rank} on {exit_info.host or '?'}"
            stem = f"{exit_info.host}.rank-{exit_info.rank}"
            signum, code = exit_info.signal, exit_info.exit_code
        else:
            child = self.first_failed
            who, stem = child.label, child.label
            returncode = child.process.returncode
            signum, code = (-returncode, None) if returncode < 0 else (None, returncode)
        self.raise_failure(who, stem, signum, code, first_file)

    def raise_failure(self, who, stem, signum, code, first_file) -> None:
        message = first_file[1] if first_file else (self.tailer.last_line(stem) if self.tailer else None)
        if signum is not None:
            how = f"was killed by signal {signum} ({signal_name(signum)})"
            if signum in {int(s) for s in EXTERNAL_SIGNALS} and first_file is None:
                raise JobFailure(
                    f"InternalServerError: {who} {how}: out of memory, or killed from outside the job",
                    INTERNAL_ERROR)
        else:
            how = f"exited with code {code}"
        raise JobFailure(f"AlgorithmError: {who} {how}" + (f": {message}" if message else ""), ALGORITHM_ERROR)

    # -- results --
    def finish(self) -> None:
        master = self.host_dir(self.hosts[0])
        archive = self.job_dir / "artifacts" / MODEL_ARCHIVE
        pack_directory(master / "model", archive)
        self.storage.put_file(archive, self.model_uri)
        self.note(f"model: {self.model_uri}")
        output_data = master / "output" / "data"
        if output_data.is_dir() and any(output_data.iterdir()):
            out = self.job_dir / "artifacts" / OUTPUT_ARCHIVE
            pack_directory(output_data, out)
            self.storage.put_file(out, join_uri(self.output_prefix, OUTPUT_ARCHIVE))

    def always(self) -> None:
        if self.mpi_launch is not None:
            shutil.rmtree(self.mpi_launch.scratch, ignore_errors=True)
        # SageMaker: checkpoints are synced to S3 during the job, so they survive a failure
        # and a retried or re-run job resumes from them.
        if not self.checkpoint_uri:
            return
        for host in self.hosts:
            local = Path(contract.relocate(self.checkpoint_local, self.host_dir(host)))
            if local.is_dir():
                try:
                    self.storage.put_tree(local, self.checkpoint_uri)
                except StorageError as error:
                    self.note(f"{host}: checkpoint upload failed: {error}")

    def describe(self, status, reason, start, end) -> dict:
        doc = dict(self.request)
        doc.update({
            "TrainingJobName": self.name,
            "TrainingJobArn": _arn(self.region, self.account, "training-job", self.name),
            "TrainingJobStatus": status,
            "SecondaryStatus": status,
            "TrainingStartTime": now_iso(start),
            "TrainingEndTime": now_iso(end),
            "TrainingTimeInSeconds": int(round(end - start)),
            "FinalMetricDataList": self.metrics.final(),
        })
        if status == "Completed":
            doc["ModelArtifacts"] = {"S3ModelArtifacts": self.model_uri}
        if reason:
            doc["FailureReason"] = reason
        return doc


# --- Processing ------------------------------------------------------------------------------
class ProcessingJob(LocalJob):
    kind = "Processing"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cluster = ((self.request.get("ProcessingResources") or {}).get("ClusterConfig") or {})
        self.hosts = contract.host_names(int(cluster.get("InstanceCount", 1)))
        self.instance_type = str(cluster.get("InstanceType", "local"))
        app = self.request.get("AppSpecification") or {}
        self.argv = [*(app.get("ContainerEntrypoint") or []), *(app.get("ContainerArguments") or [])]
        self.exit_message: str | None = None
        self.outputs = ((self.request.get("ProcessingOutputConfig") or {}).get("Outputs") or [])

    def job_config(self) -> dict:
        config = dict(self.request)
        config["ProcessingJobName"] = self.name
        config["ProcessingJobArn"] = _arn(self.region, self.account, "processing-job", self.name)
        return config

    def prepare(self) -> None:
        if not self.argv:
            raise JobFailure("AppSpecification has no ContainerEntrypoint: the local runner has no "
                             "image to take a default command from", CLIENT_ERROR)
        shares = []
        for item in self.request.get("ProcessingInputs") or []:
            name = item.get("InputName", "?")
            label = f"processing input {name!r}"
            s3 = item.get("S3Input")
            if s3 is None:
                raise ch.ChannelError(f"{label}: only S3Input is supported locally "
                                      "(DatasetDefinition inputs are not)")
            if s3.get("S3InputMode", "File") != ch.FILE:
                raise ch.ChannelError(f"{label}: S3InputMode {s3.get('S3InputMode')} is not "
                                      "supported locally for processing; use File")
            if s3.get("S3DataType", "S3Prefix") != "S3Prefix":
                raise ch.ChannelError(f"{label}: S3DataType {s3.get('S3DataType')} is not supported locally")
            if s3.get("S3CompressionType", "None") not in ("None", None):
                raise ch.ChannelError(f"{label}: S3CompressionType needs Pipe mode")
            distribution = s3.get("S3DataDistributionType", ch.FULLY_REPLICATED)
            objects = ch.list_objects(self.storage, s3["S3Uri"], label)
            shares.append((s3, ch.assign(objects, distribution, len(self.hosts), label, s3["S3Uri"])))
        for output in self.outputs:
            uri = (output.get("S3Output") or {}).get("S3Uri")
            S3Uri.parse(uri, f"processing output {output.get('OutputName')!r} S3Uri")
        config = self.job_config()
        for index, host in enumerate(self.hosts):
            base = self.host_dir(host)
            contract.write_processing_tree(base, current_host=host, hosts=self.hosts, job_config=config)
            for s3, per_host in shares:
                target = Path(contract.relocate(s3["LocalPath"], base))
                ch.stage_files(self.storage, per_host[index], target, ch.FILE)

    def launch(self) -> None:
        for host in self.hosts:
            base = self.host_dir(host)
            env = base_environment(dict(os.environ))
            env.update(contract.processing_environment(base, self.request.get("Environment")))
            env["PYTHONUNBUFFERED"] = "1"
            argv = local_python([str(contract.relocate(str(a), base)) for a in self.argv])
            self.spawn(host, argv, env, base, self.logs_dir / f"{host}.log")

    def outcome(self) -> None:
        child = self.first_failed
        if child is None:
            return
        message = _read_reason(Path(contract.relocate(EXIT_MESSAGE_FILE, self.host_dir(child.label))))
        self.exit_message = message
        returncode = child.process.returncode
        if returncode < 0 and -returncode in {int(s) for s in EXTERNAL_SIGNALS} and not message:
            raise JobFailure(f"InternalServerError: {child.label} {describe_exit(returncode)}: "
                             "out of memory, or killed from outside the job", INTERNAL_ERROR)
        detail = message or (self.tailer.last_line(child.label) if self.tailer else None)
        raise JobFailure(f"AlgorithmError: {child.label} {describe_exit(returncode)}"
                         + (f": {detail}" if detail else ""), ALGORITHM_ERROR)

    def finish(self) -> None:
        for output in self.outputs:
            s3 = output.get("S3Output") or {}
            for host in self.hosts:
                local = Path(contract.relocate(s3["LocalPath"], self.host_dir(host)))
                if local.is_dir():
                    self.storage.put_tree(local, s3["S3Uri"])
            self.note(f"output {output.get('OutputName')}: {s3['S3Uri']}")

    def describe(self, status, reason, start, end) -> dict:
        doc = self.job_config()
        doc.update({
            "ProcessingJobStatus": status,
            "ProcessingStartTime": now_iso(start),
            "ProcessingEndTime": now_iso(end),
        })
        if self.exit_message:
            doc["ExitMessage"] = self.exit_message
        if reason:
            doc["FailureReason"] = reason
        return doc

