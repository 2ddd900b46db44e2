"""``trainpipe run --local``'s options for how the execution runs its steps:

    --max-parallel-steps N        steps running at once at most (SageMaker's
                                  ParallelismConfiguration.MaxParallelExecutionSteps; default 50)
    --stub STEP.OUTPUT=VALUE      a step that cannot run here (EMR, a Lambda with no handler, ...)
                                  is stubbed as Succeeded with this output (repeatable)
    --lambda STEP=FILE.py:FUNC    a Lambda step runs this local handler (repeatable)
    --callback-timeout SECONDS    how long a Callback step waits for `trainpipe callback`

and the line that says which pipeline name a definition file runs under.
"""

from __future__ import annotations

import argparse

from pipeline.errors import UserError
from pipeline.local.dag import scheduler, stubs


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def add_run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--max-parallel-steps", type=positive, metavar="N",
                     help="independent steps run side by side, at most N at once (SageMaker's "
                          f"MaxParallelExecutionSteps; default {scheduler.DEFAULT_MAX_PARALLEL_STEPS}, "
                          "its per-execution maximum); each gets its share of the cores")
    run.add_argument("--stub", action="append", default=[], metavar="STEP.OUTPUT=VALUE",
                     help="a step that cannot run locally (Lambda, Callback, ...) is marked Succeeded "
                          "with this value of its declared output (repeatable), so a condition on it "
                          "takes the branch that value takes")
    run.add_argument("--lambda", action="append", default=[], dest="lambdas", metavar="STEP=FILE.py:FUNCTION",
                     help="the Lambda step STEP runs this local handler, called as Lambda calls it with the "
                          "step's inputs; its returned dict gives the step's outputs (repeatable)")
    run.add_argument("--callback-timeout", type=positive, metavar="SECONDS",
                     help="a Callback step fails when no `trainpipe callback` answers it in time "
                          "(default: it waits until answered)")


def run_options(args: argparse.Namespace) -> dict:
    """RunOptions' fields these options set."""
    try:
        values = stubs.parse_values(getattr(args, "stub", None) or [])
    except stubs.DefinitionError as error:
        raise UserError(str(error)) from None
    from pipeline.local.lambda_steps import parse_handlers

    return {"max_parallel_steps": getattr(args, "max_parallel_steps", None), "stub_values": values,
            "lambdas": parse_handlers(getattr(args, "lambdas", None) or []),
            "callback_timeout": getattr(args, "callback_timeout", None)}


def pipeline_name_line(args: argparse.Namespace, name: str, written: bool) -> str | None:
    """A definition file run without --pipeline-name runs under a name SageMaker would not give
    it: said at the start, since the steps see it (ExecutionVariables.PIPELINE_NAME, the ARNs,
    the S3 paths built from them) and the step cache and MLflow experiment are keyed by it.
    ``written``: the name came from the file's Metadata (``trainpipe definition`` writes it), which
    can equal the file's stem, so the stem cannot tell the two apart."""
    if getattr(args, "definition", None) is None or getattr(args, "setting_pipeline_name", None) is not None:
        return None
    source = "written in the definition file" if written else "the definition file's name"
    return (f"pipeline name: {name} ({source}, as no --pipeline-name was given); on SageMaker "
            f"it is the name the pipeline is created with: pass --pipeline-name NAME for the same "
            f"ExecutionVariables.PIPELINE_NAME, ARNs and S3 paths")
