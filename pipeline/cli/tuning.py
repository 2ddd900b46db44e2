"""``trainpipe describe-hyper-parameter-tuning-job [NAME]``: a local tuning job (a Tuning
step of ``run --local``) as SageMaker's DescribeHyperParameterTuningJob shows it;
``--training-jobs`` adds its trials as ListTrainingJobsForHyperParameterTuningJob lists them
(best first)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.jobs.tuning.hyperparameter_tuning import DESCRIPTION_FILE, SUMMARIES_KEY
from pipeline.workdir import HELP as WORKDIR_HELP
from pipeline.workdir import resolve_workdir


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "describe-hyper-parameter-tuning-job",
        help="a local tuning job (Tuning step of run --local), as DescribeHyperParameterTuningJob shows it")
    parser.add_argument("name", nargs="?", help="the tuning job's name (default: the latest in the workdir)")
    parser.add_argument("--training-jobs", action="store_true",
                        help="add TrainingJobSummaries: its trials, best first")
    parser.add_argument("--workdir", type=lambda t: Path(t).resolve(), default=None, help=WORKDIR_HELP)
    parser.set_defaults(func=run_describe)


def run_describe(args: argparse.Namespace) -> int:
    workdir = resolve_workdir(args.workdir).path
    found = sorted((workdir / "runs").glob(f"*/jobs/{args.name or '*'}/{DESCRIPTION_FILE}"),
                   key=lambda p: p.stat().st_mtime)
    found = [p for p in found if SUMMARIES_KEY in p.read_text()]  # tuning jobs, not training jobs
    if not found:
        what = f"no tuning job {args.name!r}" if args.name else "no tuning job"
        raise UserError(f"{what} in {workdir}: a Tuning step of `trainpipe run --local` makes one "
                        f"(`trainpipe status --local --workdir {workdir}` shows the steps)")
    described = json.loads(found[-1].read_text())
    if not args.training_jobs:
        described.pop(SUMMARIES_KEY, None)
    print(json.dumps(described, indent=2, default=str))
    return 0
