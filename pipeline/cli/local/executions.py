"""``trainpipe executions --local`` and ``trainpipe status --local [ID]``: the local runs under a
workdir, shown as the cloud commands show SageMaker's. Reading them is also when an execution
whose runner died (SIGKILL, out of memory) is recorded as Failed (``execution.load``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local import execution as ex
from pipeline.local import tuning_step
from pipeline.workdir import HELP as WORKDIR_HELP
from pipeline.workdir import resolve_workdir


def add_local_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("local runs (trainpipe run --local)")
    group.add_argument("--local", action="store_true",
                       help="the executions `trainpipe run --local` made, not SageMaker's")
    group.add_argument("--workdir", type=lambda t: Path(t).resolve(), default=None,
                       help="with --local: " + WORKDIR_HELP)


def _table(headers: list[str], rows: list[list[str]], max_width: int = 100) -> str:
    cells = [[c if len(c) <= max_width else c[: max_width - 3] + "..." for c in map(str, row)]
             for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _workdir(args: argparse.Namespace) -> Path:
    # pipeline.cli.main resolved it (pipeline/workdir.py); called directly, the same rules.
    return resolve_workdir(args.workdir).path


def run_executions(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UserError("--limit must be at least 1")
    workdir = _workdir(args)
    docs = ex.list_executions(workdir)[: args.limit]
    if not docs:
        print(f"{workdir} has no local executions yet: run `trainpipe run --local --workdir {workdir}`")
        return 0
    rows = [[d.get("execution_id", ""), d.get("status", ""), (d.get("start") or "")[:19].replace("T", " "),
             d.get("pipeline_name", ""), (d.get("failure_reason") or "").splitlines()[0]
             if d.get("failure_reason") else "", _mlflow_link(d)] for d in docs]
    print(_table(["EXECUTION", "STATUS", "STARTED (UTC)", "PIPELINE", "FAILURE REASON", "MLFLOW RUN"],
                 rows, max_width=120))
    return 0


def _mlflow_link(doc: dict) -> str:
    """The execution's MLflow run (pipeline/tracking), or "-" where none was logged."""
    from pipeline.tracking.logger import last_link

    return (last_link(Path(doc["run_dir"])) if doc.get("run_dir") else None) or "-"


def run_status(args: argparse.Namespace) -> int:
    workdir = _workdir(args)
    wanted = args.execution_arn
    if wanted:
        run_dir = workdir / "runs" / wanted
        if not (run_dir / ex.RECORD_FILE).is_file():
            raise UserError(f"no local execution {wanted!r} in {workdir}: "
                            f"`trainpipe executions --local --workdir {workdir}` lists them")
        doc = ex.load(run_dir)
    else:
        docs = ex.list_executions(workdir)
        if not docs:
            raise UserError(f"{workdir} has no local executions yet: run `trainpipe run --local`")
        doc = docs[0]
    fields = [("execution", doc.get("execution_id")), ("pipeline", doc.get("pipeline_name")),
              ("status", doc.get("status")), ("started", doc.get("start")), ("ended", doc.get("end")),
              ("failure", doc.get("failure_reason")), ("run directory", doc.get("run_dir")),
              ("mlflow run", _mlflow_link(doc))]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        if value:
            print(f"{key.ljust(width)}  {value}")
    print()
    print(ex.summary_table(ex.record_from_document(doc)))
    for step in doc.get("steps", []):  # a Tuning step: its trials, one row each
        trials = tuning_step.trials_table(step.get("properties") or {})
        if trials:
            print(f"\n{step.get('name')}: {len(trials[1])} trials")
            print(_table(*trials))
    return 0
