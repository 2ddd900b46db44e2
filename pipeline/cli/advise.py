"""``trainpipe advise``: how many workers are worth it, from the runs trainpipe recorded.

    trainpipe advise [--workdir DIR] [--cloud] [--workload WORDS] [--instance-types T ...] [--max-workers N]
                     [--goal fastest|cheapest|greenest] [--budget USD] [--deadline HOURS]
                     [--plot PATH] [--price TYPE=USD_PER_HOUR] [--grid-intensity G] ...

Reads the local runs under ``--workdir`` (and with ``--cloud`` the pipeline's SageMaker
training jobs), keeps those of one workload (``--workload``, else the latest run's), fits the step model (``pipeline/costs/advisor``), prints it, its error on the runs
it has seen, the predicted time, efficiency, cost and CO2e per run for 1..N workers on each
candidate platform with the knee marked, and the recommended layout for the goal.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.cloud import _add_cost_arguments, cost_options
from pipeline.cli.local.commands import absolute_path
from pipeline.errors import UserError
from pipeline.workdir import HELP as WORKDIR_HELP


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "advise", help="predict time, cost and CO2e for 1..N workers and recommend a layout",
        description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=absolute_path, help=WORKDIR_HELP)
    parser.add_argument("--cloud", action="store_true",
                        help="also learn from the pipeline's SageMaker training jobs (credentials needed)")
    parser.add_argument("--instance-types", nargs="*", default=None, metavar="TYPE",
                        help="SageMaker candidates (default: every type a run was measured on; "
                             "CPU types also from local runs, assuming this machine's per-core speed)")
    parser.add_argument("--max-workers", type=int, default=8)
    parser.add_argument("--goal", choices=("fastest", "cheapest", "greenest"), default="fastest")
    parser.add_argument("--budget", type=float, default=None, metavar="USD", help="most a run may cost")
    parser.add_argument("--deadline", type=float, default=None, metavar="HOURS", help="longest a run may take")
    parser.add_argument("--knee-fraction", type=float, default=0.5,
                        help="an added worker is worth it while it adds at least this fraction of "
                             "one worker's throughput (default 0.5)")
    parser.add_argument("--batch-size", type=int, default=None, help="per worker (default: the runs')")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--samples-per-epoch", type=int, default=None,
                        help="training records (default: the train split of the workload's latest "
                             "run, else the default data's)")
    parser.add_argument("--workload", default=None, metavar="WORDS",
                        help="which recorded workload to advise for, by words of its line (its "
                             "architecture, data kind or input shape, e.g. \"small_cnn 64x64x3\"); "
                             "default: the latest run's. Runs of other workloads are never fitted with it")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--pipeline-name", default="trainpipe", help="with --cloud")
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG of predicted throughput and cost against workers (default "
                             "<workdir>/advise.png)")
    _add_cost_arguments(parser)
    parser.set_defaults(func=run_advise)


def default_samples_per_epoch() -> int:
    from pipeline.data.default import DIGITS_RECORDS
    from processing.contract import DEFAULT_TEST_FRACTION, DEFAULT_VALIDATION_FRACTION

    return round(DIGITS_RECORDS * (1 - DEFAULT_TEST_FRACTION - DEFAULT_VALIDATION_FRACTION))


def run_advise(args: argparse.Namespace) -> int:
    from pipeline.costs.advisor import advise

    if args.max_workers < 1:
        raise UserError("--max-workers must be 1 or more")
    overrides, options = cost_options(args)
    pricing = None
    observations, skipped = advise.observations(Path(args.workdir))
    if args.cloud:
        from pipeline.cloud.aws import Clients
        from pipeline.costs.advisor.observations import cloud_observations

        clients = Clients(args.region)
        found, also = cloud_observations(clients.sagemaker, args.pipeline_name)
        observations += found
        skipped += also
        pricing = clients.pricing
    report = advise.advise(
        observations, skipped=skipped, workdir=Path(args.workdir),
        instance_types=args.instance_types, max_workers=args.max_workers, goal=args.goal,
        budget=args.budget, deadline_hours=args.deadline, knee_fraction=args.knee_fraction,
        batch=args.batch_size, epochs=args.epochs,
        samples_per_epoch=args.samples_per_epoch, default_samples_per_epoch=default_samples_per_epoch(),
        workload=args.workload,
        region=args.region, price_overrides=overrides, options=options, pricing_client=pricing,
        plot_path=args.plot or Path(args.workdir) / "advise.png")
    print("\n".join(report.lines))
    return 0
