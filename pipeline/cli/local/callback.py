"""``trainpipe callback``: answer a waiting Callback step of a local execution, as
``SendPipelineExecutionStepSuccess`` / ``SendPipelineExecutionStepFailure`` answer one on SageMaker.

    trainpipe callback success EXECUTION STEP [--output NAME=VALUE ...] [--workdir DIR]
    trainpipe callback failure EXECUTION STEP [--reason TEXT] [--workdir DIR]

The step (pipeline/local/lambda_steps.py) prints this command when it starts waiting; it reads
the answer from the execution's run directory, so any process on this machine can send it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.errors import UserError
from pipeline.workdir import HELP as WORKDIR_HELP


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "callback", help="answer a Callback step a local execution waits on (success or failure)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("status", choices=("success", "failure"))
    parser.add_argument("execution", help="the execution's id (trainpipe executions --local)")
    parser.add_argument("step", help="the Callback step's name")
    parser.add_argument("--output", action="append", default=[], metavar="NAME=VALUE",
                        help="one of the step's OutputParameters (with success; repeatable)")
    parser.add_argument("--reason", help="why it failed (with failure)")
    parser.add_argument("--workdir", type=lambda text: Path(text).resolve(), help=WORKDIR_HELP)
    parser.set_defaults(func=answer_callback)


def answer_callback(args: argparse.Namespace) -> int:
    from pipeline.cli.local.commands import parse_key_values
    from pipeline.local import lambda_steps
    from pipeline.local.dag import interpreter

    run_dir = Path(args.workdir) / "runs" / args.execution
    definition_file = run_dir / "definition.json"
    if not definition_file.is_file():
        raise UserError(f"no execution {args.execution} in {Path(args.workdir) / 'runs'}")
    if args.status == "failure" and args.output:
        raise UserError("--output goes with success; a failure takes --reason")
    nodes = interpreter.plan(json.loads(definition_file.read_text()), allow_unsupported=True)
    outputs = parse_key_values(args.output, "--output")
    lambda_steps.answer(run_dir, nodes, args.step, args.status, outputs, args.reason)
    print(f"Callback step {args.step} of execution {args.execution}: {args.status} sent")
    return 0
