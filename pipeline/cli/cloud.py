"""The cloud commands: deploy the pipeline to SageMaker and run it there.

    trainpipe upsert [-p Name=Value ...] [--dry-run]   upload code, check, diff, create/update
    trainpipe start [-p Name=Value ...] [--wait]       start an execution (and follow it)
    trainpipe status [EXECUTION_ARN]                    one execution (default: the latest)
    trainpipe executions [--limit N]                    the pipeline's executions, newest first
    trainpipe status|executions --local [--workdir W]   the same for `run --local`'s executions
    trainpipe diff OLD.json NEW.json                    readable diff of two definitions (offline)
    trainpipe deploy [--version N] [--wait] [--dry-run] a real-time endpoint from an approved
                                                        model package in the registry

See SETTINGS_HELP for where the account settings come from.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from pipeline.cli.local import executions as local_executions
from pipeline.cli.options import (
    add_parameter_arguments,
    add_settings_arguments,
    parameter_overrides,
    settings_from_args,
)
from pipeline.definition import parameters as P
from pipeline.errors import UserError

EXIT_NOT_SUCCEEDED = 1
SETTINGS_HELP = """\
Role, bucket, model package group, KMS key, prefix and pipeline name come from the flags, else
TRAINPIPE_<NAME> variables, else the outputs of the infra stack (--stack-name, default
'trainpipe'; see infra/README.md). The region comes from --region, TRAINPIPE_REGION,
AWS_REGION / AWS_DEFAULT_REGION or the AWS profile."""


def _add_stack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack-name", default=None,
        help="infra stack whose outputs supply the settings not given (default: "
             "$TRAINPIPE_STACK_NAME or 'trainpipe')",
    )


def _add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """The few settings the commands after upsert need: where the pipeline is."""
    group = parser.add_argument_group("where the pipeline is (also TRAINPIPE_<NAME> variables)")
    group.add_argument("--region", dest="setting_region", default=None)
    group.add_argument("--pipeline-name", dest="setting_pipeline_name", default=None)
    _add_stack_argument(parser)


def _add_cost_arguments(parser: argparse.ArgumentParser) -> None:
    """Instead of a factor trainpipe lacks, or to use one's own (a negotiated rate)."""
    group = parser.add_argument_group("cost and carbon")
    group.add_argument("--price", action="append", metavar="TYPE=USD_PER_HOUR", default=[],
                       help="price of an instance type (default: AWS Price List API, else the "
                            "shipped table); repeatable")
    group.add_argument("--grid-intensity", type=float, default=None, metavar="G_CO2E_PER_KWH",
                       help="grid carbon intensity (default: the region's, from codecarbon's data)")
    group.add_argument("--pue", type=float, default=None, help="data-centre PUE (default: AWS' 1.15)")
    group.add_argument("--power", action="append", metavar="TYPE=WATTS", default=[],
                       help="an instance type's power draw, for types without published figures")


def cost_options(args: argparse.Namespace):
    from pipeline.costs.accounting import Options
    from pipeline.costs.prices import parse_overrides

    power = {}
    for item in args.power:
        name, _, watts = item.partition("=")
        try:
            power[name] = float(watts)
        except ValueError:
            raise UserError(f"--power {item!r}: expected INSTANCE_TYPE=WATTS, e.g. --power ml.foo.xlarge=250") from None
    return parse_overrides(args.price), Options(grid_intensity=args.grid_intensity, pue=args.pue, power=power)


def register(subparsers) -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    upsert = subparsers.add_parser(
        "upsert", help="upload the code and create or update the pipeline on SageMaker",
        description="Upload the code bundles (content-addressed: unchanged code is not uploaded "
        "again) and the default data if missing, check the definition against the schema and "
        "for credentials, print a diff against the deployed definition, then create or update "
        "the pipeline.\n\n" + SETTINGS_HELP,
        formatter_class=formatter,
    )
    add_parameter_arguments(upsert)
    add_settings_arguments(upsert)
    _add_stack_argument(upsert)
    upsert.add_argument("--tag", dest="tags", action="append", default=[], metavar="KEY=VALUE",
                        help="tag the pipeline (repeatable)")
    upsert.add_argument("--dry-run", action="store_true",
                        help="print what would be uploaded and the diff; write nothing")
    upsert.set_defaults(func=run_upsert)

    start = subparsers.add_parser(
        "start", help="start an execution on SageMaker (--wait: follow it to the end)",
        description="Start an execution of the deployed pipeline. -p values are checked against "
        "the deployed definition's parameters before anything starts. With --wait, print "
        "progress until it ends; the exit status is 0 only if it Succeeded.",
    )
    add_parameter_arguments(start)
    _add_target_arguments(start)
    start.add_argument("--wait", action="store_true", help="follow the execution until it ends")
    start.add_argument("--poll-seconds", type=float, default=30.0, help="(default: 30)")
    start.add_argument("--timeout-minutes", type=float, default=None,
                       help="stop waiting after this long (the execution goes on)")
    start.add_argument("--display-name", default=None, help="the execution's display name")
    start.set_defaults(func=run_start)

    status = subparsers.add_parser("status", help="show one execution and its steps")
    _add_cost_arguments(status)
    status.add_argument("execution_arn", nargs="?", default=None,
                        help="default: the pipeline's latest execution")
    _add_target_arguments(status)
    local_executions.add_local_arguments(status)
    status.set_defaults(func=run_status)

    executions = subparsers.add_parser("executions", help="list the pipeline's executions")
    executions.add_argument("--limit", type=int, default=20, help="(default: 20)")
    _add_target_arguments(executions)
    local_executions.add_local_arguments(executions)
    executions.set_defaults(func=run_executions)

    diff = subparsers.add_parser(
        "diff", help="readable diff of two definition JSON files (offline)",
        description="Compare two files written by `trainpipe definition -o`: parameters and "
        "steps by name, each changed value by its path.",
    )
    diff.add_argument("old", type=Path)
    diff.add_argument("new", type=Path)
    diff.set_defaults(func=run_diff)
    _register_deploy(subparsers)


def _register_deploy(subparsers) -> None:
    from pipeline.settings import INFERENCE_INSTANCE_TYPE, Settings

    deploy = subparsers.add_parser(
        "deploy", help="create or update a real-time endpoint from an approved model package",
        description="Deploy a model package of the registry to a real-time SageMaker endpoint:\n"
        "CreateModel from the package, a new EndpointConfig, then CreateEndpoint, or\n"
        "UpdateEndpoint in place when the endpoint exists (no downtime). Default: the group's\n"
        "latest Approved version. An endpoint bills per instance-hour until it is deleted:\n"
        "aws sagemaker delete-endpoint --endpoint-name NAME\n\n" + SETTINGS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = deploy.add_mutually_exclusive_group()
    which.add_argument("--version", type=int, default=None, metavar="N",
                       help="version N of the group (default: the latest Approved one)")
    which.add_argument("--model-package-arn", default=None, metavar="ARN",
                       help="a model package by ARN (any group)")
    deploy.add_argument("--allow-unapproved", action="store_true",
                        help="deploy a package that is not Approved "
                             "(PendingManualApproval, Rejected)")
    deploy.add_argument("--endpoint-name", default=None, metavar="NAME",
                        help="default: the model package group's name")
    deploy.add_argument("--instance-type", default=INFERENCE_INSTANCE_TYPE, metavar="TYPE",
                        help=f"(default: {INFERENCE_INSTANCE_TYPE}, the type the pipeline "
                             "registers)")
    deploy.add_argument("--instance-count", type=int, default=1, metavar="N", help="(default: 1)")
    deploy.add_argument("--tag", dest="tags", action="append", default=[], metavar="KEY=VALUE",
                        help="tag the model, config and endpoint (repeatable)")
    deploy.add_argument("--dry-run", action="store_true",
                        help="print what would be created or updated; write nothing")
    deploy.add_argument("--wait", action="store_true",
                        help="follow the endpoint until InService or Failed")
    deploy.add_argument("--poll-seconds", type=float, default=30.0, help="(default: 30)")
    deploy.add_argument("--timeout-minutes", type=float, default=None,
                        help="stop waiting after this long (the deployment goes on)")
    group = deploy.add_argument_group("account settings (also TRAINPIPE_<NAME> variables)")
    group.add_argument("--region", dest="setting_region", default=None, metavar="REGION")
    group.add_argument("--role-arn", dest="setting_role_arn", default=None, metavar="ARN",
                       help="execution role the endpoint runs as (default: the stack's)")
    group.add_argument("--model-package-group", dest="setting_model_package_group", default=None,
                       metavar="GROUP", help="(default: the stack's ModelPackageGroupName, "
                                             f"else {Settings().model_package_group!r})")
    group.add_argument("--no-network-isolation", dest="setting_network_isolation",
                       action="store_false", default=None,
                       help="let the serving container reach the network")
    _add_stack_argument(deploy)
    deploy.set_defaults(func=run_deploy)


def _target(args: argparse.Namespace, required=()):
    from pipeline.cloud.account import given_sources, resolve_target
    from pipeline.cloud.stack import stack_name

    settings = settings_from_args(args)
    flags = {k[len("setting_"):]: v for k, v in vars(args).items() if k.startswith("setting_")}
    return resolve_target(
        settings, given_sources(flags), stack_name=stack_name(args.stack_name), required=required
    )


def _parse_tags(items: list[str]) -> dict[str, str]:
    tags = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--tag {item!r}: expected KEY=VALUE")
        if key.strip().lower().startswith("aws:"):
            raise UserError(f"--tag {item!r}: keys starting with 'aws:' are reserved by AWS")
        tags[key.strip()] = value
    return tags


def run_upsert(args: argparse.Namespace) -> int:
    from pipeline.cloud.account import DEPLOY_SETTINGS
    from pipeline.cloud.deploy import apply_upsert, plan_upsert

    overrides = parameter_overrides(args)
    tags = _parse_tags(args.tags)
    target = _target(args, required=DEPLOY_SETTINGS)
    settings = target.settings
    print(f"pipeline {settings.pipeline_name!r} in {settings.region}")
    note = P.warmup_note(overrides)
    if note:
        print(note)
    for field, label in (("role_arn", "execution role"), ("bucket", "artifact bucket"),
                         ("prefix", "key prefix"), ("model_package_group", "model package group"),
                         ("kms_key_id", "KMS key"), ("training_image_repository", "training image repo")):
        value = getattr(settings, field)
        source = target.sources.get(field, "default")
        print(f"  {label:<20} {value if value else '(none: the bucket default and AWS-managed keys)'}"
              + (f"  [{source}]" if value else ""))
    plan = plan_upsert(target, overrides, tags)
    print("definition: passes the schema check; no credentials in it")
    for name in plan.unchanged_bundles:
        print(f"code bundle {name}: already uploaded")
    groups: dict[str, list[str]] = {}
    for upload in plan.uploads:
        groups.setdefault(upload.what, []).append(upload.key)
    for what, keys in groups.items():
        where = keys[0] if len(keys) == 1 else os.path.commonprefix(keys).rpartition("/")[0] + "/"
        print(f"{what}: upload {len(keys)} object(s) to s3://{settings.bucket}/{where}")
    print("changes against the deployed definition:" if not plan.creates else "deployed: nothing yet")
    print("\n".join("  " + line for line in plan.diff.splitlines()))
    if args.dry_run:
        print("dry run: nothing was uploaded, created or updated")
        return 0
    arn = apply_upsert(plan)
    verb = "created" if plan.creates else "updated" if plan.changes_pipeline else "up to date:"
    print(f"{verb} {arn}")
    print("next: trainpipe start --wait")
    return 0


def run_start(args: argparse.Namespace) -> int:
    from pipeline.cloud import executions as ex

    overrides = parameter_overrides(args)
    target = _target(args)
    settings, sagemaker = target.settings, target.clients.sagemaker
    deployed = ex.deployed_definition(sagemaker, settings.pipeline_name, settings.region)
    parameters = ex.execution_parameters(deployed, overrides)
    # Before any job: the data under InputDataUri (listed in S3) fits ModelArchitecture.
    from pipeline.data.kind import check_input_data
    from pipeline.local.store.storage import Boto3Storage

    check_input_data(Boto3Storage(client=target.clients.s3), ex.execution_values(deployed, parameters),
                     has_model_file=ex.ships_model_file(deployed))
    arn = ex.start_execution(sagemaker, settings.pipeline_name, parameters, args.display_name)
    print(f"started {arn}")
    print("parameters: " + (", ".join(f"{p['Name']}={p['Value']}" for p in parameters)
                            or "the deployed defaults"))
    if not args.wait:
        print(f"follow it: trainpipe status {arn}")
        return 0
    timeout = args.timeout_minutes * 60 if args.timeout_minutes else None
    described, steps, _ = ex.wait_for_execution(
        sagemaker, arn, poll_seconds=args.poll_seconds, timeout_seconds=timeout
    )
    status = described["PipelineExecutionStatus"]
    if status == ex.SUCCEEDED:
        print(f"execution {ex.execution_id(arn)} Succeeded")
        return 0
    print(f"execution {ex.execution_id(arn)} {status}", file=sys.stderr)
    for line in ex.failure_lines(described, steps):
        print(f"  {line}", file=sys.stderr)
    return EXIT_NOT_SUCCEEDED


def _arn_region(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[3] if len(parts) > 5 and parts[0] == "arn" and parts[3] else None


def run_status(args: argparse.Namespace) -> int:
    if args.local:
        return local_executions.run_status(args)
    from pipeline.cloud import executions as ex

    if args.execution_arn and args.setting_region is None:
        # The ARN says where the execution is.
        args.setting_region = _arn_region(args.execution_arn)
    target = _target(args)
    sagemaker = target.clients.sagemaker
    arn = args.execution_arn or ex.latest_execution_arn(sagemaker, target.settings.pipeline_name)
    if arn is None:
        raise UserError(
            f"pipeline {target.settings.pipeline_name!r} has no executions in "
            f"{target.settings.region} yet: run `trainpipe start`"
        )
    described = ex.describe_execution(sagemaker, arn)
    lister = ex.StepLister(sagemaker)
    steps = lister.steps(arn)
    print(ex.status_report(described, ex.execution_parameters_of(sagemaker, arn), steps, lister))
    _print_costs(args, target, steps)
    return 0


def _print_costs(args: argparse.Namespace, target, steps: list[dict] | None) -> None:
    from pipeline.costs import accounting
    from pipeline.costs.cloud import execution_costs
    from pipeline.costs.prices import PriceBook

    overrides, options = cost_options(args)
    book = PriceBook(overrides, pricing_client=target.clients.pricing)
    jobs = execution_costs(target.clients.sagemaker, steps or [], target.settings.region, book, options)
    for line in accounting.report_lines(jobs, local=False):
        print(line)
    if book.api_problem:
        print(f"  {book.api_problem}")


def run_executions(args: argparse.Namespace) -> int:
    if args.local:
        return local_executions.run_executions(args)
    from pipeline.cloud import executions as ex

    if args.limit < 1:
        raise UserError("--limit must be at least 1")
    target = _target(args)
    name = target.settings.pipeline_name
    summaries = ex.list_executions(target.clients.sagemaker, name, args.limit)
    if not summaries:
        print(f"pipeline {name!r} has no executions in {target.settings.region} yet")
        return 0
    print(ex.executions_table(summaries))
    return 0


def run_diff(args: argparse.Namespace) -> int:
    from pipeline.cloud.diff import definition_diff

    documents = []
    for path in (args.old, args.new):
        try:
            documents.append(json.loads(path.read_text()))
        except (OSError, ValueError) as error:
            raise UserError(f"{path}: not a readable definition JSON ({error})") from None
    print(definition_diff(*documents))
    return 0


def run_deploy(args: argparse.Namespace) -> int:
    from pipeline.cloud import endpoint as ep

    tags = _parse_tags(args.tags)
    request = ep.DeployRequest(
        group="", role_arn="", endpoint_name=args.endpoint_name, version=args.version,
        package_arn=args.model_package_arn, instance_type=args.instance_type,
        instance_count=args.instance_count, allow_unapproved=args.allow_unapproved, tags=tags,
    )
    ep.check_request(request)  # bad flags fail before credentials, the stack or any call
    if args.poll_seconds < 0 or (args.timeout_minutes is not None and args.timeout_minutes <= 0):
        raise UserError("--poll-seconds must be 0 or more, and --timeout-minutes more than 0")
    if args.model_package_arn and args.setting_region is None:
        args.setting_region = _arn_region(args.model_package_arn)  # the ARN says where it is
    target = _target(args, required=("role_arn",))
    settings, sagemaker = target.settings, target.clients.sagemaker
    request = replace(request, group=settings.model_package_group, role_arn=settings.role_arn,
                      network_isolation=settings.network_isolation)
    ep.check_tags(tags, target.clients.credential_values())
    plan = ep.plan_deploy(sagemaker, request)
    print(f"endpoint {plan.endpoint_name!r} in {settings.region}")
    for line in plan.lines():
        print(f"  {line}")
    if plan.up_to_date:
        return 0
    if args.dry_run:
        print("dry run: nothing was created or updated")
        return 0
    arn = ep.apply_deploy(sagemaker, plan)
    print(f"{'creating' if plan.creates else 'updating'} {arn}: it bills per instance-hour "
          f"until deleted (aws sagemaker delete-endpoint --endpoint-name {plan.endpoint_name})")
    if not args.wait:
        print("follow it: aws sagemaker wait endpoint-in-service --endpoint-name "
              f"{plan.endpoint_name}")
        return 0
    described = ep.wait_for_endpoint(
        sagemaker, plan.endpoint_name, poll_seconds=args.poll_seconds,
        timeout_seconds=args.timeout_minutes * 60 if args.timeout_minutes else None,
        new_config=None if plan.creates else plan.config_name,
        on_status=lambda status, seconds: print(f"  {seconds / 60:5.1f} min  {status}", flush=True),
    )
    problem = ep.outcome(plan, described)
    if problem is None:
        print(f"endpoint {plan.endpoint_name!r} InService, serving {plan.package.label}")
        return 0
    print(f"endpoint {plan.endpoint_name!r}: {problem}", file=sys.stderr)
    return EXIT_NOT_SUCCEEDED
