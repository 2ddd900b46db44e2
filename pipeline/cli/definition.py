"""``trainpipe definition``: print the pipeline definition JSON, offline.

No AWS account, network or Docker: fake credentials, telemetry off, code locations addressed
by content. ``-p Name=Value`` sets that parameter's default in the printed definition. The
output passes the structural schema check before it is printed.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.cli.options import (
    add_parameter_arguments,
    add_settings_arguments,
    parameter_overrides,
    settings_from_args,
)
from pipeline.definition import parameters as P


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "definition", help="print the SageMaker pipeline definition JSON (offline)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_parameter_arguments(parser)
    add_settings_arguments(parser)
    parser.add_argument("-o", "--output", help="write to this file instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Validate everything before the SDK is even imported.
    overrides = parameter_overrides(args)
    settings = settings_from_args(args)
    from pipeline.definition.build import build_definition
    from pipeline.definition.schema_check import check_definition

    definition = build_definition(settings, overrides)
    check_definition(definition)
    note = P.warmup_note(overrides)
    if note:
        print(note, file=sys.stderr)  # stdout is the definition
    text = json.dumps(definition, indent=2) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0
