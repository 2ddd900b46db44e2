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
the dead runner's jobs left behind (``processes.sweep`` with each job's token).
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pipeline.costs import accounting
from pipeline.local.hosts.processes import JOB_TOKEN_FILE, sweep

EXECUTING, SUCCEEDED, FAILED, STOPPED, NOT_EXECUTED = (
    "Executing", "Succeeded", "Failed", "Stopped", "NotExecuted")
RECORD_FILE = "execution.json"
RUNNER_LOCK = "runner.lock"
RUNNER_DIED = "runner died"


def timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


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

    def save(self) -> None:
        doc = asdict(self)
        for record, out in zip(self.steps, doc["steps"], strict=True):
            out["duration_seconds"] = record.duration
        doc["duration_seconds"] = _seconds(self.start, self.end)
        doc["cost"] = accounting.totals(self.job_costs())
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(doc, indent=2, default=str))
        os.replace(partial, path)

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def load(run_dir: Path) -> dict:
    """An execution's ``execution.json``; an ``Executing`` one whose runner is gone is first
    recorded as Failed (``runner died``) and its jobs' leftover processes are ended."""
    run_dir = Path(run_dir)
    path = run_dir / RECORD_FILE
    doc = json.loads(path.read_text())
    lock = run_dir / RUNNER_LOCK
    if doc.get("status") != EXECUTING or not lock.exists():
        return doc  # finished, or written before runners took the lock: nothing to tell
    fd = os.open(lock, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return doc  # its runner is alive
        # Ours now: the runner is gone; re-read, it may have finished just before it went.
        doc = json.loads(path.read_text())
        if doc.get("status") == EXECUTING:
            doc = _record_runner_death(doc, path, os.read(fd, 64).decode(errors="replace").strip())
    finally:
        os.close(fd)
    return doc


def _record_runner_death(doc: dict, path: Path, pid: str) -> dict:
    ended = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="milliseconds")
    who = f"the trainpipe process (pid {pid})" if pid else "the trainpipe process"
    reason = (f"{RUNNER_DIED}: {who} running this execution ended without finishing it "
              f"(killed with SIGKILL, out of memory, or the machine restarted); run it again")
    for step in doc.get("steps", []):
        if step.get("status") == EXECUTING:
            step.update(status=FAILED, end=step.get("end") or ended, failure_reason=RUNNER_DIED)
        token_file = Path(step.get("job_dir") or "/nonexistent") / JOB_TOKEN_FILE
        if token_file.is_file():  # the dead runner's jobs may have left processes running
            sweep(token_file.read_text().strip(), grace=1.0)
    doc.update(status=FAILED, end=doc.get("end") or ended, failure_reason=reason)
    doc["duration_seconds"] = _seconds(doc.get("start"), doc["end"])
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(doc, indent=2, default=str))
    os.replace(partial, path)
    return doc


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
    docs = []
    for path in Path(workdir).glob(f"runs/*/{RECORD_FILE}"):
        try:
            docs.append(load(path.parent))
        except (OSError, ValueError):
            continue  # a folder being created, or not ours
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
        if step.failure_reason and step.status != SUCCEEDED:
            details.append(step.failure_reason.splitlines()[0][:160])
        rows.append((step.name, step.type, step.status, _fmt_duration(step.duration), "; ".join(details)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(4)]
        lines.append("  ".join(cells + [row[4]]).rstrip())
    lines += accounting.report_lines(record.job_costs(), local=True)
    return "\n".join(lines)
