"""``trainpipe``: the command line. Each command lives in ``pipeline/cli/<name>.py`` and
registers itself through ``register(subparsers)``; this module only dispatches and turns
expected errors (bad parameters, missing settings) into one clear line and a non-zero exit.

    trainpipe definition [-p Name=Value ...]     print the pipeline definition JSON (offline)
    trainpipe run --local [-p Name=Value ...]    run the whole pipeline on this machine
    python -m pipeline ...                        the same
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import sys
import traceback

from pipeline.errors import UserError
from pipeline.workdir import resolve_workdir
from training_entry.contract import redact

# Each module defines register(subparsers) and sets a handler with set_defaults(func=...).
COMMAND_MODULES = ("pipeline.cli.definition", "pipeline.cli.cloud", "pipeline.cli.local.commands",
                   "pipeline.cli.local.callback",
                   "pipeline.cli.store", "pipeline.cli.advise", "pipeline.cli.init_weights",
                   "pipeline.cli.serving.serve", "pipeline.cli.track", "pipeline.cli.tuning")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainpipe",
        description="Horovod/MPI TensorFlow training pipelines for SageMaker, runnable locally.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Before a command imports the SageMaker SDK: its experiments module calls
    # logging.basicConfig(level=INFO) on import, which would print botocore's INFO lines
    # ("Found credentials in environment variables") on every AWS command.
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(levelname)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        if "workdir" in vars(args):  # every command that keeps or reads local runs
            args.workdir_chosen = resolve_workdir(args.workdir)  # run/train print its line
            args.workdir = args.workdir_chosen.path
        return int(args.func(args) or 0)
    except UserError as error:
        # A URI's password never reaches the terminal, whichever message echoes the URI.
        print(f"trainpipe {args.command}: error: {redact(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"trainpipe {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        # A bug, not bad input: the full traceback, on stderr (the SDK installs a rich
        # excepthook that would print it to stdout, mixed into the definition JSON).
        traceback.print_exc()
        return 1


def run() -> None:
    """The ``trainpipe`` console script: ``main``, then exit without the interpreter's final
    garbage collection walking every object the SDK and the runner made (~1 s of each
    command; benchmarks/training/scaling/p3_runner_overhead.py). ``gc.freeze`` moves them out of its reach."""
    code = main()
    sys.stdout.flush()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
