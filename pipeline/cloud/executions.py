"""Pipeline executions: start one with checked parameters, wait for it, show them as tables.

Parameter overrides are checked twice before anything starts: each value with its spec in
``parameters.py``, and the names against the parameter list of the definition that is
actually deployed (which may be older than this checkout), then the combinations (warm-up
longer than training, more shards than the default data can fill) with the deployed defaults.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from botocore.exceptions import ClientError

from pipeline.cloud.aws import aws_errors, error_code, error_message
from pipeline.data.default import DIGITS_RECORDS
from pipeline.definition import parameters as P
from pipeline.errors import UserError

SUCCEEDED = "Succeeded"
TERMINAL = frozenset({"Succeeded", "Failed", "Stopped", "CompletedWithFailures"})
# Answers of an endpoint that does not have the action at all (an emulator), as opposed to
# a transient failure worth asking again.
_UNSUPPORTED_CODES = frozenset({"NotImplemented", "UnknownOperationException", "InvalidAction"})


def deployed_definition(sagemaker, pipeline_name: str, region: str) -> dict:
    import json

    from pipeline.cloud.deploy import deployed_pipeline

    described = deployed_pipeline(sagemaker, pipeline_name)
    if described is None:
        raise UserError(
            f"pipeline {pipeline_name!r} is not deployed in {region}: run `trainpipe upsert` first "
            "(or pass --pipeline-name / --region)"
        )
    return json.loads(described["PipelineDefinition"])


def _default_data_location(uri: str) -> tuple[str, str] | None:
    """(bucket, prefix) if ``uri`` is ``parameters.default_input_data_uri(bucket, prefix)``."""
    template = P.default_input_data_uri("\0", "\1")
    head, rest = template.split("\0")
    middle, tail = rest.split("\1")
    if not (uri.startswith(head) and uri.endswith(tail)):
        return None
    bucket, sep, prefix = uri[len(head) : len(uri) - len(tail)].partition(middle)
    if sep and P.default_input_data_uri(bucket, prefix) == uri:
        return bucket, prefix
    return None


def _as_text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def execution_parameters(deployed: dict, overrides: Mapping[str, str]) -> list[dict[str, str]]:
    """The ``PipelineParameters`` of StartPipelineExecution for ``overrides`` (Name -> raw
    value), after checking them against the deployed definition; raises ParameterError."""
    declared = {p["Name"]: p for p in deployed.get("Parameters") or []}
    fixed = [name for name in overrides if name in P.BY_NAME and P.BY_NAME[name].build_only]
    if fixed:
        raise P.ParameterError(
            f"{', '.join(fixed)} is fixed when the definition is built (it picks the images and the code): "
            f"deploy with `trainpipe upsert -p {fixed[0]}=...`, then start")
    unknown = [name for name in overrides if name not in declared]
    if unknown:
        raise P.ParameterError(
            f"the deployed pipeline has no parameter {', '.join(sorted(unknown))} (it has "
            f"{', '.join(declared) or 'none'}): run `trainpipe upsert` to deploy this version"
        )
    parsed = {
        name: P.BY_NAME[name].parse(raw) if name in P.BY_NAME else raw
        for name, raw in overrides.items()
    }
    # The combinations, with the deployed defaults for everything not overridden.
    merged = {
        name: p.get("DefaultValue") for name, p in declared.items()
        if name in P.BY_NAME and p.get("DefaultValue") is not None
    }
    merged.update({k: v for k, v in parsed.items() if k in P.BY_NAME})
    merged[P.FRAMEWORK] = P.framework_of(declared)  # the deployed one's, for the checks below
    # The deployed default warm-up, longer than the epochs asked for: clamped to the run (it
    # is not the user's explicit choice), and sent so the execution uses it.
    warmup, epochs = merged.get(P.WARMUP_EPOCHS), merged.get(P.EPOCHS)
    if P.WARMUP_EPOCHS not in parsed and warmup is not None and epochs is not None \
            and int(warmup) > int(epochs):
        print(P.warmup_note({}, default_warmup=warmup, default_epochs=epochs), flush=True)
        merged[P.WARMUP_EPOCHS] = parsed[P.WARMUP_EPOCHS] = int(epochs)
    location = _default_data_location(str(declared.get(P.INPUT_DATA_URI, {}).get("DefaultValue", "")))
    bucket, prefix = location or ("", "")
    P.resolve(
        merged, bucket=bucket, prefix=prefix,
        default_data_records=DIGITS_RECORDS if location else None,
    )
    return [{"Name": name, "Value": _as_text(value)} for name, value in parsed.items()]


def execution_values(deployed: dict, parameters: list[dict[str, str]]) -> dict[str, object]:
    """Every parameter's value for an execution: the deployed defaults, then ``parameters``."""
    values = {p["Name"]: p.get("DefaultValue") for p in deployed.get("Parameters") or []}
    values.update({p["Name"]: p["Value"] for p in parameters})
    return values


def ships_model_file(deployed: dict) -> bool:
    """Whether the deployed training step was built with --model-file (its hyperparameter)."""
    from training_entry.contract import HP_MODEL_FILE

    return any(
        HP_MODEL_FILE in ((step.get("Arguments") or {}).get("HyperParameters") or {})
        for step in deployed.get("Steps") or []
    )


def start_execution(
    sagemaker, pipeline_name: str, parameters: list[dict[str, str]], display_name: str | None = None
) -> str:
    request = {"PipelineName": pipeline_name, "PipelineParameters": parameters}
    if display_name:
        request["PipelineExecutionDisplayName"] = display_name
    with aws_errors(f"starting pipeline {pipeline_name!r}"):
        return sagemaker.start_pipeline_execution(**request)["PipelineExecutionArn"]


def describe_execution(sagemaker, arn: str) -> dict:
    with aws_errors(f"describing execution {arn}"):
        return sagemaker.describe_pipeline_execution(PipelineExecutionArn=arn)


def execution_parameters_of(sagemaker, arn: str) -> list[dict[str, str]]:
    with aws_errors(f"reading the parameters of {arn}"):
        pages = sagemaker.get_paginator("list_pipeline_parameters_for_execution").paginate(
            PipelineExecutionArn=arn
        )
        return [p for page in pages for p in page.get("PipelineParameters", [])]


class StepLister:
    """ListPipelineExecutionSteps, which not every endpoint implements (moto does not):
    without it a command still works and says once why the step detail is missing."""

    def __init__(self, sagemaker):
        self._sagemaker = sagemaker
        self.unsupported_reason: str | None = None
        self.last_error: str | None = None

    def steps(self, arn: str) -> list[dict] | None:
        if self.unsupported_reason:
            return None
        try:
            pages = self._sagemaker.get_paginator("list_pipeline_execution_steps").paginate(
                PipelineExecutionArn=arn, SortOrder="Ascending"
            )
            steps = [step for page in pages for step in page.get("PipelineExecutionSteps", [])]
        except ClientError as error:
            code, message = error_code(error), error_message(error)
            reason = f"ListPipelineExecutionSteps failed ({code}: {message})"
            # A bare HTTP status with a non-AWS body: the endpoint has no such action.
            if code in _UNSUPPORTED_CODES or (code.isdigit() and message.startswith("HTTP ")):
                self.unsupported_reason = (
                    f"step details unavailable: this endpoint does not implement "
                    f"ListPipelineExecutionSteps ({code}: {message})"
                )
                return None
            self.last_error = reason
            return None
        self.last_error = None
        return steps


def latest_execution_arn(sagemaker, pipeline_name: str) -> str | None:
    newest = list_executions(sagemaker, pipeline_name, 1)
    return newest[0]["PipelineExecutionArn"] if newest else None


def list_executions(sagemaker, pipeline_name: str, limit: int) -> list[dict]:
    found: list[dict] = []
    with aws_errors(f"listing the executions of {pipeline_name!r}"):
        pages = sagemaker.get_paginator("list_pipeline_executions").paginate(
            PipelineName=pipeline_name, SortBy="CreationTime", SortOrder="Descending"
        )
        for page in pages:
            found += page.get("PipelineExecutionSummaries") or []
            if len(found) >= limit:
                break
    # Newest first, whatever order the endpoint used.
    found.sort(key=lambda s: s.get("StartTime") or datetime.min.replace(tzinfo=timezone.utc),
               reverse=True)
    return found[:limit]


# --- Waiting ------------------------------------------------------------------------------------


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _step_summary(steps: list[dict] | None) -> str:
    if not steps:
        return ""
    return "  " + ", ".join(f"{s['StepName']} {s.get('StepStatus', '?')}" for s in steps)


def wait_for_execution(
    sagemaker,
    arn: str,
    *,
    poll_seconds: float = 30.0,
    timeout_seconds: float | None = None,
    out=None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict, list[dict] | None, StepLister]:
    """Poll until the execution ends; print a line whenever its status or a step's changes.
    Returns (final description, final steps or None, the step lister)."""
    out = out or sys.stdout
    lister = StepLister(sagemaker)
    started = clock()
    shown = None
    told_unsupported = False
    hint = f"it goes on without this command; follow it with `trainpipe status {arn}`"
    while True:
        with aws_errors(f"waiting for {arn} ({hint})"):
            described = sagemaker.describe_pipeline_execution(PipelineExecutionArn=arn)
        status = described["PipelineExecutionStatus"]
        steps = lister.steps(arn)
        if lister.unsupported_reason and not told_unsupported:
            print(f"  ({lister.unsupported_reason}; showing the execution status only)", file=out)
            told_unsupported = True
        state = (status, tuple((s["StepName"], s.get("StepStatus")) for s in steps or []))
        if state != shown:
            line = f"[{_clock(clock() - started)}] {status:<10}{_step_summary(steps)}"
            print(line.rstrip(), file=out, flush=True)
            shown = state
        if status in TERMINAL:
            return described, steps, lister
        if timeout_seconds is not None and clock() - started >= timeout_seconds:
            raise UserError(
                f"gave up waiting after {_clock(timeout_seconds)}; the execution is still "
                f"{status}: {hint}"
            )
        sleep(poll_seconds)


def failure_lines(described: dict, steps: list[dict] | None) -> list[str]:
    """Why an execution did not succeed: its own reason and every failed step's."""
    lines = []
    reason = (described.get("FailureReason") or "").strip()
    if reason:
        lines.append(f"reason: {reason}")
    for step in steps or []:
        if step.get("StepStatus") in ("Failed", "Stopped") or step.get("FailureReason"):
            lines.append(
                f"step {step['StepName']} {step.get('StepStatus')}: "
                f"{(step.get('FailureReason') or 'no reason given').strip()}"
            )
    if not lines:
        lines.append("no failure reason was reported")
    return lines


# --- Tables --------------------------------------------------------------------------------------


def when(value) -> str:
    if not isinstance(value, datetime):
        return "" if value is None else str(value)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def execution_id(arn: str) -> str:
    """The last part of an execution ARN (.../pipeline/NAME/execution/ID)."""
    return re.sub(r".*/execution/", "", arn)


def format_table(headers: list[str], rows: list[list[str]], max_width: int = 60) -> str:
    cells = [[str(c) if len(str(c)) <= max_width else str(c)[: max_width - 3] + "..." for c in row]
             for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def executions_table(summaries: list[dict]) -> str:
    rows = [
        [
            execution_id(s["PipelineExecutionArn"]),
            s.get("PipelineExecutionStatus", ""),
            when(s.get("StartTime")),
            s.get("PipelineExecutionDisplayName") or "",
            # moto writes the string "None" for no reason.
            "" if str(s.get("PipelineExecutionFailureReason")) in ("None", "") else
            str(s.get("PipelineExecutionFailureReason")),
        ]
        for s in summaries
    ]
    return format_table(["EXECUTION", "STATUS", "STARTED", "NAME", "FAILURE REASON"], rows)


def steps_table(steps: list[dict]) -> str:
    rows = [
        [
            s["StepName"],
            s.get("StepStatus", ""),
            when(s.get("StartTime")),
            when(s.get("EndTime")),
            "cache hit" if s.get("CacheHitResult") else "",
            (s.get("FailureReason") or "").strip(),
        ]
        for s in steps
    ]
    return format_table(["STEP", "STATUS", "STARTED", "ENDED", "CACHE", "FAILURE REASON"], rows,
                        max_width=80)


def status_report(described: dict, parameters: list[dict[str, str]], steps: list[dict] | None,
                  lister: StepLister) -> str:
    reason = (described.get("FailureReason") or "").strip()
    fields = [
        ("execution", described["PipelineExecutionArn"]),
        ("status", described["PipelineExecutionStatus"]),
        ("started", when(described.get("CreationTime"))),
        ("last change", when(described.get("LastModifiedTime"))),
    ]
    if described.get("PipelineExecutionDisplayName"):
        fields.insert(1, ("name", described["PipelineExecutionDisplayName"]))
    if reason:
        fields.append(("failure", reason))
    fields.append(
        ("parameters", ", ".join(f"{p['Name']}={p['Value']}" for p in parameters) or "(defaults)")
    )
    width = max(len(k) for k, _ in fields)
    text = "\n".join(f"{k.ljust(width)}  {v}" for k, v in fields)
    if steps:
        text += "\n\n" + steps_table(steps)
    elif lister.unsupported_reason or lister.last_error:
        text += f"\n\n({lister.unsupported_reason or lister.last_error})"
    elif steps is not None:
        text += "\n\n(no steps have started yet)"
    return text
