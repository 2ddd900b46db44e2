"""One local pipeline execution on disk: ``execution.json`` and the summary table.

``execution.json`` is rewritten after every change, so a crash or Ctrl-C leaves an accurate
picture: the execution's status, parameters, and for every step its type, status, start/end,
attempts, failure reason, job name and folder, cache hit, metrics and resolved properties.
Statuses use SageMaker's words (Executing, Succeeded, Failed, Stopped) plus ``NotExecuted``
for steps in the branch a condition did not take.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pipeline.costs import accounting

EXECUTING, SUCCEEDED, FAILED, STOPPED, NOT_EXECUTED = (
    "Executing", "Succeeded", "Failed", "Stopped", "NotExecuted")


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
