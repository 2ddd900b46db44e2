"""Command-line options shared by the commands: build settings and ``-p`` parameters.

A setting comes from its flag, else its TRAINPIPE_<NAME> environment variable, else the
default in ``pipeline.settings.Settings``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from pipeline.definition.parameters import (
    SPECS,
    TUNED_PARAMETERS,
    parse_assignments,
    pretrained_note,
    strategy_defaults,
)
from pipeline.errors import UserError
from pipeline.settings import (
    ENV_PREFIX,
    TUNE_EARLY_STOPPING,
    TUNE_STRATEGIES,
    Settings,
    from_environment,
)
from pipeline.tracking.target import HELP as TRACKING_HELP
from training_entry.contract import MIXED_PRECISION_CHOICES, STRATEGIES


def add_parameter_arguments(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(spec.name for spec in SPECS)
    parser.add_argument(
        "-p", "--parameter", dest="parameters", action="append", default=[],
        metavar="Name=Value", help=f"set a pipeline parameter (repeatable); one of: {names}",
    )


# flag -> Settings field
_SETTING_FLAGS = {
    "--pipeline-name": "pipeline_name",
    "--region": "region",
    "--role-arn": "role_arn",
    "--bucket": "bucket",
    "--prefix": "prefix",
    "--model-package-group": "model_package_group",
    "--training-image-repository": "training_image_repository",
    "--init-model-uri": "init_model_uri",
    "--model-file": "model_file",
    "--kms-key-id": "kms_key_id",
    "--mixed-precision": "mixed_precision",
    "--distribution": "distribution",
    "--tracking-uri": "tracking_uri",
}


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "build settings (fixed when the definition is built; also TRAINPIPE_<NAME> variables)"
    )
    for flag, field in _SETTING_FLAGS.items():
        kwargs = {"dest": f"setting_{field}", "default": None, "help": f"default: {getattr(Settings(), field)!r}"}
        if field == "mixed_precision":
            kwargs["choices"] = MIXED_PRECISION_CHOICES
        if field == "tracking_uri":  # MLflow: pipeline/tracking (local runs), tracking/jobs.py (SageMaker)
            kwargs["help"] = TRACKING_HELP
        if field == "distribution":
            kwargs["choices"] = STRATEGIES
            kwargs["help"] += " (how the workers share the training; see docs: Distribution strategies)"
        group.add_argument(flag, **kwargs)
    group.add_argument("--fusion-threshold-bytes", dest="setting_fusion_threshold_bytes", type=int,
                       default=None, help="Horovod tensor-fusion buffer (HOROVOD_FUSION_THRESHOLD)")
    group.add_argument("--cycle-time-ms", dest="setting_cycle_time_ms", type=float, default=None,
                       help="Horovod cycle time in ms (HOROVOD_CYCLE_TIME)")
    group.add_argument("--fp16-allreduce", dest="setting_fp16_allreduce", action="store_true",
                       default=None, help="compress gradients to fp16 for the allreduce")
    group.add_argument("--no-network-isolation", dest="setting_network_isolation",
                       action="store_false", default=None, help="let the jobs reach the network")
    group.add_argument("--spot", dest="setting_use_spot", action="store_true", default=None,
                       help="managed spot training (resumes from checkpoints)")
    group.add_argument("--tune", dest="setting_tune_jobs", type=_trials, default=None, metavar="N",
                       help="tune the training: a TuningStep of N trials over the base learning rate, "
                            "batch size and warm-up epochs, maximising validation accuracy; evaluation "
                            "and registration take the best trial's model (default: off; docs/tuning.md)")
    group.add_argument("--tune-parallel", dest="setting_tune_parallel_jobs", type=int, default=None,
                       metavar="N", help="trials run side by side with --tune N, at most N (default: 2; above N is refused)")
    group.add_argument("--tune-strategy", dest="setting_tune_strategy", default=None, choices=TUNE_STRATEGIES,
                       help="how --tune chooses each trial's values (default: Bayesian)")
    group.add_argument("--tune-early-stopping", dest="setting_tune_early_stopping", default=None,
                       choices=TUNE_EARLY_STOPPING, help="Auto stops trials that trail the earlier ones (default: Auto)")


def _trials(text: str) -> int:
    """--tune N: N >= 1; 0 would build the untuned pipeline while the user asked for tuning."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of trials") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} trials: give N >= 1, or leave --tune out to train once")
    return number


def settings_from_args(args: argparse.Namespace, base: Settings | None = None) -> Settings:
    settings = from_environment(base)
    changes = {
        key[len("setting_"):]: value
        for key, value in vars(args).items()
        if key.startswith("setting_") and value is not None
    }
    try:
        settings = replace(settings, **changes)
    except (TypeError, ValueError) as error:
        raise UserError(str(error)) from None
    parallel = changes.get("tune_parallel_jobs")
    # Only a --tune-parallel the user gave: the default (2) is lowered for --tune 1 (steps/tune.py).
    if parallel is not None and settings.tune_jobs and parallel > settings.tune_jobs:
        raise UserError(f"--tune-parallel {parallel} is more than the {settings.tune_jobs} trials of --tune "
                        f"{settings.tune_jobs}: give --tune-parallel {settings.tune_jobs} or less, or more trials")
    variable = ENV_PREFIX + "TUNE_PARALLEL_JOBS"  # given too, if in the environment rather than a flag
    if parallel is None and os.environ.get(variable) and settings.tune_jobs \
            and settings.tune_parallel_jobs > settings.tune_jobs:
        raise UserError(f"{variable}={settings.tune_parallel_jobs} is more than the {settings.tune_jobs} trials of "
                        f"--tune {settings.tune_jobs}: set it to {settings.tune_jobs} or less, or give more trials")
    return settings


def check_tuned_parameters(settings: Settings, overrides: dict) -> None:
    """With --tune the tuning job chooses these parameters for each trial: a -p of one would
    be silently replaced by the trial's value, so it is refused."""
    given = [name for name in TUNED_PARAMETERS if name in overrides]
    if settings.tune_jobs and given:
        shown = " ".join(f"-p {name}={overrides[name]}" for name in given)
        raise UserError(f"{shown} with --tune: the tuning job chooses {', '.join(TUNED_PARAMETERS)} for each "
                        f"trial (docs/tuning.md); drop {shown}, or drop --tune to train with it")


def parameter_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The ``-p`` assignments; for a command that builds the definition (it has
    ``--distribution``), the chosen strategy's defaults where the user set none, said once on
    stderr (stdout may be the definition)."""
    overrides = parse_assignments(args.parameters)
    if not hasattr(args, "setting_distribution"):
        return overrides
    settings = settings_from_args(args)
    check_tuned_parameters(settings, overrides)
    chosen, note = strategy_defaults(settings.distribution, overrides)
    for line in (note, pretrained_note(overrides, settings.init_model_uri)):
        if line:
            print(line, file=sys.stderr, flush=True)
    return {**overrides, **chosen}
