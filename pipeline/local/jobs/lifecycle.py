"""The lifecycle every local job shares: a SageMaker TrainingJob / ProcessingJob request run
as local processes (``training_job.py``, ``processing_job.py``).

The request is the dict the definition's step ``Arguments`` evaluate to (CreateTrainingJob /
CreateProcessingJob shape). Every simulated host (``algo-1`` ... ``algo-N``) gets its own
``/opt/ml`` tree under ``<job dir>/hosts/<host>`` (``contract.py`` writes it); the host's
processes see it at ``/opt/ml`` itself, in namespaces of their own (``namespaces.py``), or
where that is not possible through ``SAGEMAKER_BASE_DIR`` and the ``SM_*`` variables. Their log lines
and metrics go through ``job_logs.py``; why a job failed is ``job_failures.py``'s to say.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.hosts import namespaces
from pipeline.local.hosts.processes import (
    JOB_TOKEN_FILE,
    ProcessSet,
    interrupts_deferred,
    new_token,
)
from pipeline.local.jobs import contract
from pipeline.local.jobs.failures import (
    ALGORITHM_ERROR,
    CLIENT_ERROR,
    INTERNAL_ERROR,
    RESOURCE_LIMIT,
    JobFailure,
)
from pipeline.local.jobs.logs import LogTailer, Metrics, Sink
from pipeline.local.store import channels as ch
from pipeline.local.store.storage import Storage, StorageError

POLL_SECONDS = 0.05
# What of the runner's environment a job gets. SageMaker gives a container only its request's
# Environment and the platform's variables, never the caller's: a job here gets those (set by
# the job kinds) plus what a process on this machine needs to run Python, TensorFlow and MPI.
# Anything else (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, GITHUB_TOKEN, ...) stays out of
# the job, of its MPI launch specs and of anything it could write into the job tree.
_RUNTIME_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
    "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
    "PYTHONWARNINGS", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    # SageMaker sets the region in every container; not a secret.
    "AWS_REGION", "AWS_DEFAULT_REGION",
})
_RUNTIME_PREFIXES = ("LC_", "TF_", "HOROVOD_", "NCCL_", "KMP_", "MKL_", "OPENBLAS_", "CUDA_",
                     "XLA_", "TRAINPIPE_", "COV_CORE_", "COVERAGE_")
# Even on the lists above, a name like these is a credential's and is never passed on.
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSW|CREDENTIAL|PRIVATE|(^|_)(API_)?KEY($|_)|AUTH",
                          re.IGNORECASE)
_PYTHON_NAMES = re.compile(r"^python(3(\.\d+)?)?$")


class JobStopped(KeyboardInterrupt):
    """The job was stopped (Ctrl-C / SIGTERM); carries the stopped job's result."""

    def __init__(self, result: JobResult):
        super().__init__("stopped")
        self.result = result



def arn(region: str, account: str, kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:{kind}/{name}"


def account_of(request: dict) -> str:
    """The account in the request's role ARN (arn:aws:iam::<account>:role/...), for ARNs."""
    parts = str(request.get("RoleArn", "")).split(":")
    return parts[4] if len(parts) > 4 and parts[4] else "000000000000"


def passed_to_jobs(name: str) -> bool:
    """Whether the runner's variable ``name`` reaches a job's processes."""
    if _SECRET_NAME.search(name):
        return False
    return name in _RUNTIME_NAMES or name.startswith(_RUNTIME_PREFIXES)


def base_environment(environ: dict) -> dict:
    """What of the runner's environment a job's processes start from: only what they need to
    run here (``passed_to_jobs``); the job kinds add the request's Environment and the
    contract's variables. Nothing of another container (SM_*, OMPI_*) and no credential.

    TensorFlow's INFO start-up lines (oneDNN, CPU instructions) are hidden unless the user
    set TF_CPP_MIN_LOG_LEVEL: every rank and step prints them, burying the job's own output."""
    env = {k: v for k, v in environ.items() if passed_to_jobs(k)}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    # The image's python/python3 are the runner's Python (see local_python), also for what
    # calls them by name: FrameworkProcessor's runproc.sh, a shell entry point.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH") or os.defpath])
    return env


def local_python(argv: list[str]) -> list[str]:
    """The image's ``python3`` is this machine's Python with TensorFlow: the runner's own."""
    if argv and _PYTHON_NAMES.match(Path(argv[0]).name):
        return [sys.executable, *argv[1:]]
    return list(argv)


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
        # Whoever finds this job's runner dead ends its processes by this token
        # (execution.load); private, like everything that could reach them.
        token_file = self.job_dir / JOB_TOKEN_FILE
        token_file.parent.mkdir(parents=True, exist_ok=True)
        token_file.write_text(self.processes.token)
        token_file.chmod(0o600)
        self.feeders = ch.FeederSet()
        self.logs_dir = self.job_dir / "logs"
        self.logs_dir.mkdir(exist_ok=True)
        self.tailer: LogTailer | None = None
        self.max_runtime = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        self.first_failed = None  # the child that failed first
        self.stopped = False
        self.interrupted = False  # Ctrl-C / SIGTERM arrived while the job was being cleaned up
        # SageMaker: each host's processes see their own tree at /opt/ml and are called algo-N
        # (namespaces.py); where this machine cannot do that, container paths are relocated.
        self.no_namespaces = namespaces.unavailable_reason()

    def container_base(self, host: str) -> Path:
        """Where ``host``'s processes find its /opt/ml: /opt/ml itself, or its directory."""
        return Path(namespaces.CONTAINER_BASE) if self.no_namespaces is None else self.host_dir(host)

    def as_host(self, host: str, argv: list[str], cwd: Path) -> tuple[list[str], Path]:
        """(command, working directory to start it in) for a process of ``host``."""
        if self.no_namespaces is not None:
            return argv, Path(contract.relocate(str(cwd), self.host_dir(host)))
        return (namespaces.command(host, self.host_dir(host), str(cwd), argv, hosts=self.hosts_file()),
                self.host_dir(host))

    def hosts_file(self) -> str:
        """SageMaker: every host's name resolves (here to this machine), in /etc/hosts."""
        path = self.job_dir / "etc-hosts"
        if not path.exists():
            namespaces.hosts_file(path, self.hosts)
        return str(path)

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
                if self.no_namespaces is not None:
                    self.note(namespaces.fallback_notice(self.no_namespaces))
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
                if self.no_namespaces is not None:
                    reason = namespaces.explain_missing_path(reason)
            except StorageError as error:
                status, reason, failure_type = "Failed", str(error), error.kind or CLIENT_ERROR
            except UserError as error:  # a bad channel, URI or request: before anything ran
                status, reason, failure_type = "Failed", str(error), CLIENT_ERROR
            except Exception as error:  # noqa: BLE001 - anything else is still the job's end
                # SageMaker: whatever goes wrong, the job ends Failed with a reason; the
                # traceback goes to the job's log for whoever debugs the runner.
                status, failure_type = "Failed", INTERNAL_ERROR
                reason = f"InternalServerError: {type(error).__name__}: {error}"
                for line in traceback.format_exc().rstrip().splitlines():
                    self.note(line)
            finally:
                # Cleanup runs to its end whatever signals arrive meanwhile (a second Ctrl-C
                # only hurries the processes' end): no process of the job may survive it.
                with interrupts_deferred() as deferred:
                    self.stop_children()
                    problems = self.feeders.stop()
                    for problem in problems:
                        self.note(problem)
                    self.stop_tailer()
                    self.always()
                if deferred.since_start:
                    self.interrupted = True
        except KeyboardInterrupt:
            status, reason = "Stopped", "stopped by the user (Ctrl-C / SIGTERM)"
        if self.interrupted and status != "Stopped":
            status, reason, failure_type = "Stopped", "stopped by the user (Ctrl-C / SIGTERM)", None
        # Writing the job's record is cleanup too: a Ctrl-C here must not leave it unwritten.
        with interrupts_deferred() as late:
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
            (self.job_dir / "description.json").write_text(
                json.dumps(result.description, indent=2, default=str))
        if status == "Stopped" or late.since_start:
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
        # "stopped" only once termination has finished: an interrupt cannot leave it half done
        # (terminate defers them) and marked done.
        if self.processes.children and not self.stopped:
            if self.processes.terminate():
                self.interrupted = True
            self.stopped = True

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

