"""One local pipeline execution on disk: ``execution.json`` and the summary table.

``execution.json`` is rewritten after every change, so a crash or Ctrl-C leaves an accurate
picture: the execution's status, parameters, and for every step its type, status, start/end,
attempts, failure reason, job name and folder, cache hit, metrics and resolved properties.
Statuses use SageMaker's words (Executing, Succeeded, Failed, Stopped) plus ``NotExecuted``
for steps in the branch a condition did not take.

A runner holds a lock on ``<run dir>/runner.lock`` while it runs the execution; the kernel
lets go of it however the runner ends (SIGKILL, the OOM killer). Whatever reads an execution
(``load``) and finds it ``Executing`` with the lock free knows the runner died: it records
the execution and its executing steps as Failed ("runner died ...") and ends the processes
the dead runner's jobs left behind (``processes.sweep`` with each job's token). The next
runner in the same workdir does the same first (``recover_dead_runners``), so a leftover
mpirun never outlives more than one run.

Execution ids are the start time to the microsecond and 32 random bits, and each is taken by
creating its folder (``reserve``: mkdir fails if it exists), so two runners never share one.
The records hold the execution's parameters: they are written 0600 in a 0700 run folder.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pipeline.costs import accounting
from pipeline.local.hosts.processes import JOB_TOKEN_FILE, sweep
from pipeline.local.store.private import write_private

EXECUTING, SUCCEEDED, FAILED, STOPPED, NOT_EXECUTED = (
    "Executing", "Succeeded", "Failed", "Stopped", "NotExecuted")
RECORD_FILE = "execution.json"
RUNNER_LOCK = "runner.lock"
RUNNER_DIED = "runner died"
# An execution whose record cannot be read (listed all the same, with why).
UNREADABLE = "Unreadable"
# Steps that run side by side record from their own threads: one writer of a record at a time.
_RECORD_LOCK = threading.RLock()


def timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_execution_id() -> str:
    """Sortable and readable: ``20240131-235959-123456-1f2e3d4c`` (local time, microseconds,
    32 random bits)."""
    return f"{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}-{secrets.token_hex(4)}"


def reserve(run_dir: Path) -> None:
    """Take an execution's folder ``<workdir>/runs/<id>`` by creating it (0700): mkdir fails
    when it exists, so no two runners ever record into one, whatever their ids."""
    from pipeline.errors import UserError

    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        run_dir.mkdir(mode=0o700)
    except FileExistsError:
        raise UserError(f"execution {run_dir.name} already exists in {run_dir.parent} (another "
                        f"runner took the same id); run again for a new one") from None


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


@dataclass
class StepRecord:
    name: str
    type: str
    status: str = EXECUTING
    start: str | None = None
    end: str | None = None
    attempts: int = 0
    failure_reason: str | None = None
    job_name: str | None = None
    job_dir: str | None = None
    cache_hit: dict | None = None  # {"execution_id", "key"} when served from the cache
    metrics: dict = field(default_factory=dict)  # final value per metric
    detail: str | None = None  # the condition's account, the registered package, ...
    properties: dict = field(default_factory=dict)
    cost: dict | None = None  # the job's cost and energy (pipeline/costs/accounting.py)

    @property
    def duration(self) -> float | None:
        return _seconds(self.start, self.end)


@dataclass
class ExecutionRecord:
    execution_id: str
    pipeline_name: str
    run_dir: str
    parameters: dict
    status: str = EXECUTING
    start: str = field(default_factory=timestamp)
    end: str | None = None
    failure_reason: str | None = None
    steps: list[StepRecord] = field(default_factory=list)

    def job_costs(self) -> list[dict]:
        return [{**s.cost, "step": s.name} for s in self.steps if s.cost]

    @property
    def path(self) -> Path:
        return Path(self.run_dir) / "execution.json"

    def step(self, name: str) -> StepRecord | None:
        return next((s for s in self.steps if s.name == name), None)

    def add(self, step: StepRecord) -> StepRecord:
        with _RECORD_LOCK:
            self.steps.append(step)
        return step

    def save(self) -> None:
        with _RECORD_LOCK:
            self._save()

    def _save(self) -> None:
        doc = asdict(self)
        for record, out in zip(self.steps, doc["steps"], strict=True):
            out["duration_seconds"] = record.duration
        doc["duration_seconds"] = _seconds(self.start, self.end)
        doc["cost"] = accounting.totals(self.job_costs())
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Private: the parameters and the steps' properties hold the requests' Environment.
        write_private(path, json.dumps(doc, indent=2, default=str))

    def finish(self, status: str, reason: str | None = None) -> None:
        self.status = status
        self.failure_reason = reason
        self.end = timestamp()
        self.save()


class RunnerLock:
    """Held by the process running an execution, from before its first record to after its
    last; released by the kernel however that process ends."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / RUNNER_LOCK
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or say in one line who holds it."""
        from pipeline.errors import UserError

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            run_dir = self.path.parent
            raise UserError(
                f"execution {run_dir.name} in {run_dir.parent.parent} is being run by another "
                f"trainpipe process{f' (pid {holder})' if holder else ''}; wait for it to end, "
                f"or stop it (kill {holder or '<pid>'}), or start a new execution") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def load(run_dir: Path) -> dict:
    """An execution's ``execution.json``; an ``Executing`` one whose runner is gone is first
    recorded as Failed (``runner died``) and its jobs' leftover processes are ended. A record
    that cannot be read is returned as status ``Unreadable`` with why (``failure_reason``)."""
    run_dir = Path(run_dir)
    path = run_dir / RECORD_FILE
    try:
        doc = _read(path)
    except (OSError, ValueError) as error:
        return _unreadable(run_dir, error)
    lock = run_dir / RUNNER_LOCK
    if doc.get("status") != EXECUTING or not lock.exists():
        return doc  # finished, or written before runners took the lock: nothing to tell
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError as error:
        return _liveness_unknown(doc, f"cannot open {lock}: {error.strerror}")
    try:
        # Shared: a read-only descriptor cannot take an exclusive lock on NFS (EBADF), and a
        # shared one is refused just the same while the runner holds its exclusive lock.
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return _liveness_unknown(doc, f"cannot lock {lock}: {error.strerror}")
            return doc  # its runner is alive
        # The runner is gone; re-read, it may have finished just before it went.
        doc = _read(path)
        if doc.get("status") == EXECUTING:
            doc = _record_runner_death(doc, path, os.read(fd, 64).decode(errors="replace").strip())
    finally:
        os.close(fd)
    return doc


def _liveness_unknown(doc: dict, why: str) -> dict:
    """Shown, never saved: whether the runner lives cannot be told here."""
    doc["failure_reason"] = f"{why}; whether its runner is alive cannot be checked"
    return doc


def _read(path: Path) -> dict:
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, found {type(doc).__name__}")
    return doc


def _unreadable(run_dir: Path, error: Exception) -> dict:
    try:
        when = datetime.fromtimestamp(run_dir.stat().st_mtime, timezone.utc).isoformat(timespec="milliseconds")
    except OSError:
        when = None
    why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return {"execution_id": run_dir.name, "pipeline_name": "", "run_dir": str(run_dir),
            "parameters": {}, "status": UNREADABLE, "start": when, "steps": [],
            "failure_reason": f"cannot read {run_dir / RECORD_FILE}: {why}"}


def _record_runner_death(doc: dict, path: Path, pid: str) -> dict:
    ended = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="milliseconds")
    who = f"the trainpipe process (pid {pid})" if pid else "the trainpipe process"
    reason = (f"{RUNNER_DIED}: {who} running this execution ended without finishing it "
              f"(killed with SIGKILL, out of memory, or the machine restarted); run it again")
    swept = 0
    for step in doc.get("steps", []):
        if step.get("status") == EXECUTING:
            step.update(status=FAILED, end=step.get("end") or ended, failure_reason=RUNNER_DIED)
        token_file = Path(step.get("job_dir") or "/nonexistent") / JOB_TOKEN_FILE
        if token_file.is_file():  # the dead runner's jobs may have left processes running
            swept += len(sweep(token_file.read_text().strip(), grace=1.0))
    doc.update(status=FAILED, end=doc.get("end") or ended, failure_reason=reason)
    doc["duration_seconds"] = _seconds(doc.get("start"), doc["end"])
    write_private(path, json.dumps(doc, indent=2, default=str))
    doc["swept_processes"] = swept  # this reader's account, not part of the record
    return doc


def recover_dead_runners(workdir: Path) -> list[dict]:
    """Every execution under ``workdir`` whose runner died, recorded as Failed now and its
    jobs' leftover processes ended (``load``): what a new runner does before it starts."""
    recovered = []
    for path in sorted(Path(workdir).glob(f"runs/*/{RECORD_FILE}")):
        if (path.parent / RUNNER_LOCK).exists():
            doc = load(path.parent)
            if "swept_processes" in doc:
                recovered.append(doc)
    return recovered


def record_from_document(doc: dict) -> ExecutionRecord:
    """An ``execution.json`` document back as a record (for the summary table)."""
    from dataclasses import fields

    def known(cls, data: dict) -> dict:
        names = {f.name for f in fields(cls)}
        return {k: v for k, v in data.items() if k in names}

    record = ExecutionRecord(**known(ExecutionRecord, {**doc, "steps": []}))
    record.steps = [StepRecord(**known(StepRecord, step)) for step in doc.get("steps", [])]
    return record


def list_executions(workdir: Path) -> list[dict]:
    """Every local execution under ``workdir`` (``load``ed), newest first."""
    # Never one left out: a record that cannot be read is listed as Unreadable, with why.
    docs = [load(path.parent) for path in Path(workdir).glob(f"runs/*/{RECORD_FILE}")]
    return sorted(docs, key=lambda d: d.get("start") or "", reverse=True)


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def summary_table(record: ExecutionRecord) -> str:
    """The steps as a fixed-width table: name, type, status, duration, details."""
    rows = [("STEP", "TYPE", "STATUS", "TIME", "DETAILS")]
    for step in record.steps:
        details = []
        if step.cache_hit:
            details.append(f"cached from {step.cache_hit['execution_id']}")
        if step.metrics:
            details.append(" ".join(f"{k}={v:.4g}" for k, v in step.metrics.items()))
        if step.detail:
            details.append(step.detail)
        if step.attempts > 1:
            details.append(f"{step.attempts} attempts")
        # A failed step's reason is the run's last line (and `status --local`'s failure line),
        # said once, not here too.
        rows.append((step.name, step.type, step.status, _fmt_duration(step.duration), "; ".join(details)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(4)]
        lines.append("  ".join(cells + [row[4]]).rstrip())
    # A failed run: the failure is the news, its cost one line (execution.json keeps it all).
    lines += (accounting.report_line(record.job_costs()) if record.status == FAILED
              else accounting.report_lines(record.job_costs(), local=True))
    return "\n".join(lines)
