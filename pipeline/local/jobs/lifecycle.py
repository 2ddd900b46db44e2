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

import contextlib
import dataclasses
import json
import os
import re
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.environment import passed_on, scrubbed
from pipeline.errors import UserError
from pipeline.local.hosts import namespaces, waiting
from pipeline.local.hosts.processes import (
    JOB_TOKEN_FILE,
    ProcessSet,
    interrupts_deferred,
    new_token,
    stop_reason,
)
from pipeline.local.hosts.scripts import script_pids
from pipeline.local.jobs import contract
from pipeline.local.jobs.environments import environment as job_environment
from pipeline.local.jobs.environments.environment import JobEnvironment
from pipeline.local.jobs.failures import (
    ALGORITHM_ERROR,
    CLIENT_ERROR,
    INTERNAL_ERROR,
    RESOURCE_LIMIT,
    JobFailure,
)
from pipeline.local.jobs.logs import LogTailer, Metrics, Sink
from pipeline.local.store import channels as ch
from pipeline.local.store.private import private_dir, write_private
from pipeline.local.store.storage import Storage, StorageError
from training_entry.contract import BASE_DIR_ENV

POLL_SECONDS = 0.05
# SageMaker gives a stopped job's scripts 120 s after SIGTERM (StopTrainingJob); a local run's
# user waits at the terminal, so less here, and a second Ctrl-C ends the wait.
SCRIPT_STOP_SECONDS = 10.0
LAUNCHER_STOP_SECONDS = 1.0  # then, for the launchers around scripts that did not end in time
_PYTHON_NAMES = re.compile(r"^python(3(\.\d+)?)?$")
# Where a job's hosts' home directories are, under the job's folder.
HOMES = "home"
# Jobs' environments (``environments/environment.py``), cached between jobs: under the workdir.
ENVIRONMENTS = "job-environments"
# The literal container base in a job's code, outside a comment line.
_NAMES_OPT_ML = re.compile(r"^(?!\s*#).*?" + re.escape(namespaces.CONTAINER_BASE) + r"(?![\w.-])",
                           re.MULTILINE)
# Set to 0 in the runner's environment: run code that names /opt/ml without namespaces anyway
# (it only falls back to /opt/ml when an SM_* variable is missing, say).
OPT_ML_CHECK_ENV = "TRAINPIPE_OPT_ML_CHECK"
_CODE_SUFFIXES = (".py", ".sh", ".bash", ".R", ".r", ".ipynb")
_SCAN_LIMIT_BYTES = 1 << 20
_SCAN_LIMIT_FILES = 5000


class StopRequested(KeyboardInterrupt):
    """Raised in a job's wait when ``LocalJob.stop_requested`` is set: the runner's Ctrl-C,
    passed to a job that runs on a thread of its own (a signal reaches only the main thread)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    """Whether the runner's variable ``name`` reaches a job's processes (the stated
    allowlist, ``pipeline/environment.py``)."""
    return passed_on(name)


def base_environment(environ: dict, *, home: Path | None = None,
                     python: JobEnvironment | None = None) -> dict:
    """What of the runner's environment a job's processes start from: only what they need to
    run here (``passed_to_jobs``); the job kinds add the request's Environment and the
    contract's variables (and TF_CONFIG, where a strategy needs it, per host). Nothing of
    another container (SM_*, OMPI_*), no credential, not the runner's HOME: ``home`` is the
    job's own (SageMaker: the image's /root, holding nothing of the caller's).

    TensorFlow's INFO start-up lines (oneDNN, CPU instructions) are hidden unless the user
    set TF_CPP_MIN_LOG_LEVEL: every rank and step prints them, burying the job's own output."""
    env = scrubbed(environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if home is not None:
        env["HOME"] = str(home)
    rest = env.get("PATH") or os.defpath
    if python is not None:
        # The image's python/python3 and pip are the job environment's, also for what calls
        # them by name: FrameworkProcessor's runproc.sh, a shell entry point.
        env.update(python.variables())
        env["PATH"] = python.path(rest)
    else:
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), rest])
    return env


def local_python(argv: list[str], python: str = sys.executable) -> list[str]:
    """The image's ``python3`` is this machine's: the job environment's ``python``."""
    if argv and _PYTHON_NAMES.match(Path(argv[0]).name):
        return [python, *argv[1:]]
    return list(argv)


def names_container_base(paths) -> str | None:
    """``file:line`` where the job's code (``paths``: files or folders) names /opt/ml itself
    (outside a comment line), or None. Code that reads SAGEMAKER_BASE_DIR anywhere is taken
    to move its /opt/ml paths as the toolkit does (trainpipe's own entrypoints do)."""
    first, seen = None, 0
    for top in map(Path, paths):
        named = not top.is_dir()  # a file the command names: whatever its suffix
        for path in [top] if named else sorted(top.rglob("*")):
            if seen >= _SCAN_LIMIT_FILES:
                break
            if path.is_symlink() or not path.is_file() or path.stat().st_size > _SCAN_LIMIT_BYTES:
                continue
            if not named and path.suffix not in _CODE_SUFFIXES:
                continue
            seen += 1
            text = path.read_text(errors="replace")
            if BASE_DIR_ENV in text:
                return None
            match = first is None and _NAMES_OPT_ML.search(text)
            if match:
                first = f"{path}:{text.count(chr(10), 0, match.end()) + 1}"
    return first


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
    # Completed, but not as it should have been (an empty model): said in the step's status.
    warnings: list[str] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return self.end - self.start



# --- The common lifecycle --------------------------------------------------------------------
class LocalJob:
    kind = "Job"

    image_uri = ""  # the request's image: which job environment (``environments/environment.py``)

    def __init__(self, request: dict, name: str, storage: Storage, job_dir: Path, *,
                 region: str = "us-east-1", echo: bool = True, stream=None,
                 environments: Path | None = None):
        self.request = request
        self.name = name
        self.storage = storage
        self.job_dir = Path(job_dir)
        self.region = region
        self.account = account_of(request)
        self.log_path = self.job_dir / "job.log"
        # Private, like everything in it: the request's Environment and hyperparameters are in
        # request.json, description.json and every host's config files.
        private_dir(self.job_dir)
        write_private(self.job_dir / "request.json", json.dumps(request, indent=2, sort_keys=True))
        # Cached between jobs where the caller says (the workdir's); else this job's own.
        self.environments = Path(environments) if environments else self.job_dir / ENVIRONMENTS
        self.python_env: JobEnvironment | None = None
        self.warnings: list[str] = []  # said in the job's last line and its result
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
        # Set by whoever runs the job on another thread (the runner's steps side by side): the
        # job stops at its next poll, as on Ctrl-C (the stop signal's reason is its reason).
        self.stop_requested = None  # a threading.Event
        self.interrupted = False  # Ctrl-C / SIGTERM arrived while the job was being cleaned up
        self.scripts_ended = False  # stopped: every script ended by itself after its SIGTERM
        # SageMaker: each host's processes see their own tree at /opt/ml and are called algo-N
        # (namespaces.py); where this machine cannot do that, container paths are relocated.
        self.no_namespaces = namespaces.unavailable_reason()

    def container_base(self, host: str) -> Path:
        """Where ``host``'s processes find its /opt/ml: /opt/ml itself, or its directory."""
        return Path(namespaces.CONTAINER_BASE) if self.no_namespaces is None else self.host_dir(host)

    def as_host(self, host: str, argv: list[str], cwd: Path, env: dict | None = None) -> tuple[list[str], Path]:
        """(command, working directory to start it in) for a process of ``host`` that will
        be started with ``env`` (all of it reaches ``argv``, whatever the launcher)."""
        if self.no_namespaces is not None:
            return argv, Path(contract.relocate(str(cwd), self.host_dir(host)))
        return (namespaces.command(host, self.host_dir(host), str(cwd), argv, hosts=self.hosts_file(), env=env),
                self.host_dir(host))

    def hosts_file(self) -> str:
        """SageMaker: every host's name resolves (here to this machine), in /etc/hosts."""
        path = self.job_dir / "etc-hosts"
        if not path.exists():
            namespaces.hosts_file(path, self.hosts)
        return str(path)

    def host_dir(self, host: str) -> Path:
        return self.job_dir / "hosts" / host

    def home_dir(self, host: str) -> Path:
        """SageMaker: HOME is the image's /root, none of the caller's; here a fresh folder
        per host (its ranks share it, as they share the instance's)."""
        return private_dir(self.job_dir / HOMES / host)

    def environment(self, host: str) -> dict:
        """What every process of ``host`` starts from (``base_environment``)."""
        return base_environment(dict(os.environ), home=self.home_dir(host), python=self.python_env)

    @property
    def python(self) -> str:
        """The job's ``python``/``python3``: its job environment's."""
        return self.python_env.python if self.python_env is not None else sys.executable

    def ready(self) -> None:
        """After prepare(), before any process: refuse code that would share /opt/ml, make
        the job's Python environment."""
        if self.no_namespaces is not None and os.environ.get(OPT_ML_CHECK_ENV, "1") != "0":
            where = names_container_base(self.code_paths())
            if where is not None:
                raise JobFailure(
                    f"{where} names {namespaces.CONTAINER_BASE} itself, and this machine gives no "
                    f"job a private one ({self.no_namespaces}): every host and every later job "
                    f"would share the machine's {namespaces.CONTAINER_BASE}. Read the paths from "
                    f"the SM_* variables or SAGEMAKER_BASE_DIR, or run where Linux namespaces work "
                    f"(as root, or with unprivileged user namespaces), or set {OPT_ML_CHECK_ENV}=0 "
                    f"if the code only falls back to it", CLIENT_ERROR)
        requirements = self.requirements()
        # SageMaker: the job's Python is the image's and holds what the image and requirements
        # hold; here the image's Python where this machine has it and the image's framework is
        # not the runner's, and the rest of trainpipe's venv held back (environment.py).
        code = job_environment.facts(self.image_uri, requirements, self.code_paths()) \
            if self.kind in ("Training", "Processing") else None
        if code is not None and self.launcher_imports():
            # SageMaker: the container's launcher imports these in the job's Python (torchrun: torch).
            code = dataclasses.replace(code, imports=code.imports | self.launcher_imports())
        guard = job_environment.guard_for(self.image_uri, code) if code is not None else None
        self.python_env = job_environment.prepare(self.environments, self.image_uri, requirements,
                                                  job_dir=self.job_dir, guard=guard, code=code)
        interpreter = self.python_env.interpreter
        self.note(f"python: {self.python_env.python} (Python {interpreter.version}"
                  + (f", {job_environment.IMAGE_PYTHON_ENV}" if interpreter.mapped and interpreter.seed is None else "")
                  + (f": {interpreter.why}" if interpreter.why else "")
                  + f"; installs land in {self.python_env.root}"
                  + (f"; imports: what the image's record {guard.record} and the requirements hold"
                     + (" (of the image's, what the code names)" if interpreter.seed is not None else "")
                     if self.python_env.guard is not None else "") + ")")

    def code_paths(self) -> list[Path]:
        """The job's code on this machine (files or folders), read by ``ready``."""
        return []

    def launcher_imports(self) -> frozenset[str]:
        """What the job's launcher itself imports in the job's Python (``ready``)."""
        return frozenset()

    def requirements(self) -> bytes | None:
        """The requirements the job environment is made with (its cache key includes them)."""
        return None

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.note(f"warning: {text}")

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
                self.ready()
                self.tailer = LogTailer(self.logs_dir, self.log_prefix, self.sink, self.metrics,
                                        self.shown)
                self.tailer.start()
                self.launch()
                self.wait(start)
                self.stop_children()
                self.stop_tailer()  # every line read before the outcome is judged
                self.outcome()
                self.finish()
            except KeyboardInterrupt as interrupt:
                # A stop with a reason of its own (a tuning job stopping a trial early), else
                # the stop signal's.
                status, reason = "Stopped", getattr(interrupt, "reason", None) or stop_reason()
                self.stop_children(grace=LAUNCHER_STOP_SECONDS if self.let_scripts_end() else None)
            except JobFailure as failure:
                status, reason, failure_type = "Failed", failure.reason, failure.failure_type
                reason = self.explain(reason)
            except job_environment.InstallFailed as error:
                status, reason, failure_type = "Failed", str(error), CLIENT_ERROR
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
            status, reason = "Stopped", stop_reason()
        if self.interrupted and status != "Stopped":
            status, reason, failure_type = "Stopped", stop_reason(), None
        # Writing the job's record is cleanup too: a Ctrl-C here must not leave it unwritten.
        with interrupts_deferred() as late:
            end = time.time()
            if reason:
                # The terminal gets the reason once, on the last line of whoever ran the job
                # (run --local, train --local, a tuning job's trial line); the log keeps it here.
                self.sink.line(f"[{self.name}] {status}: {reason}", echo=False)
                self.note(f"{status} after {end - start:.1f}s")
            else:
                self.note(f"{status} in {end - start:.1f}s"
                          + "".join(f" (warning: {w})" for w in self.warnings))
            self.sink.close()
            result = JobResult(
                name=self.name, kind=self.kind, status=status,
                description=self.describe(status, reason, start, end),
                job_dir=self.job_dir, log=self.log_path, start=start, end=end,
                failure_reason=reason, failure_type=failure_type, metrics=self.metrics.series,
                warnings=list(self.warnings),
            )
            (self.job_dir / "metrics.json").write_text(json.dumps(self.metrics.series, indent=2))
            write_private(self.job_dir / "description.json",
                          json.dumps(result.description, indent=2, default=str))
        if status == "Stopped" or late.since_start:
            raise JobStopped(result)
        return result

    def wait(self, start: float) -> None:
        with waiting.on_a_job():  # helper threads' cue (MLflow logging): the runner is idle
            self._wait(start)

    def _wait(self, start: float) -> None:
        while True:
            self.poll_hook()
            if self.stop_requested is not None and self.stop_requested.is_set():
                raise StopRequested(stop_reason())
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

    def let_scripts_end(self) -> bool:
        """SageMaker: a stopped job's scripts get SIGTERM and time to save what they trained
        (``training_entry`` and ``training_torch`` finish their epoch and save). SIGTERM goes to
        the scripts, not their launchers (``hosts/scripts.py``: mpirun would kill its ranks a
        second later); the job's processes are ended afterwards, as ever. A second Ctrl-C ends
        the wait at once. True where scripts were still running when the wait ended: then
        they are killed at once (LAUNCHER_STOP_SECONDS), not given a second grace."""
        if self.stopped or not (pids := script_pids(self.processes.token)):
            return False
        self.note(f"stopping: SIGTERM to the job's scripts, which get up to {SCRIPT_STOP_SECONDS:g} s to end (a "
                  "training script finishes its epoch and saves its model); Ctrl-C again ends them at once")
        with interrupts_deferred() as deferred:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + SCRIPT_STOP_SECONDS
            while script_pids(self.processes.token) and time.monotonic() < deadline and not deferred.since_start:
                time.sleep(POLL_SECONDS * 2)
            self.scripts_ended = not script_pids(self.processes.token)
        if deferred.since_start:
            self.interrupted = True
        return not self.scripts_ended

    def stop_children(self, grace: float | None = None) -> None:
        # "stopped" only once termination has finished: an interrupt cannot leave it half done
        # (terminate defers them) and marked done.
        if self.processes.children and not self.stopped:
            if self.processes.terminate(*(() if grace is None else (grace,))):
                self.interrupted = True
            self.stopped = True

    def spawn(self, label: str, argv: list[str], env: dict, cwd: Path, log: Path):
        try:
            return self.processes.spawn(label, argv, env, cwd, log)
        except FileNotFoundError as error:
            raise JobFailure(f"cannot start {argv[0]}: {error}", CLIENT_ERROR) from error
        except BlockingIOError as error:  # EAGAIN: out of processes
            raise JobFailure(f"cannot start {argv[0]}: {error}", RESOURCE_LIMIT) from error

    def explain(self, reason: str) -> str:
        """A failure reason, with what this machine adds to it: a container path the fallback
        moved, a pip install the local Python cannot do."""
        if self.no_namespaces is not None:
            reason = namespaces.explain_missing_path(reason)
        if self.python_env is not None and ("pip" in reason or "CalledProcessError" in reason):
            logs = "".join(p.read_text(errors="replace") for p in sorted(self.logs_dir.glob("*.log")))
            install = job_environment.explain_install_failure(logs, self.python_env)
            if install:
                return f"{install} [{reason}]"
        return reason

    def poll_hook(self) -> None:
        pass

    def always(self) -> None:
        pass

    def log_prefix(self, stem: str) -> str | None:
        return stem

    def shown(self, stem: str) -> bool:
        """Whether the lines of log ``stem`` go to the terminal now (job.log gets them all)."""
        return True

