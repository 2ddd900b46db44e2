"""Which account, region, role, bucket and model registry a cloud command talks to.

Each setting comes from its flag, else its environment variable, else the infra stack's output
(``--stack-name``, default ``trainpipe``); the stack is read only when something is still
missing. ``Settings``' own defaults for the account wiring are placeholders that keep the
offline ``definition`` command working: they are never sent to AWS.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import boto3

from pipeline.cloud.aws import Clients
from pipeline.cloud.stack import OUTPUT_FOR_SETTING, StackOutputs
from pipeline.errors import UserError
from pipeline.settings import (
    ENV_PREFIX,
    PLACEHOLDER_ACCOUNT,
    PLACEHOLDER_BUCKET,
    PLACEHOLDER_ROLE,
    Settings,
)

# What a missing setting is called in the error message.
DESCRIPTIONS = {
    "region": "AWS region",
    "role_arn": "SageMaker execution role",
    "bucket": "artifact bucket",
    "model_package_group": "model package group",
    "training_image_repository": "ECR repository of trainpipe's training image",
}
# Needed to build and deploy a definition (upsert); start/status/executions need only a region.
DEPLOY_SETTINGS = ("role_arn", "bucket", "model_package_group", "training_image_repository")
REGION_ENV = ("TRAINPIPE_REGION", "AWS_REGION", "AWS_DEFAULT_REGION")


class MissingSettingError(UserError):
    """A setting that none of its sources supplied; the message names every source."""


@dataclass(frozen=True)
class Target:
    """Resolved settings, where each came from, and clients for that region."""

    settings: Settings
    sources: dict[str, str]
    clients: Clients
    stack: StackOutputs


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def given_sources(
    flag_values: Mapping[str, object], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """field -> the flag or variable that set it (flags win), for the fields that were set."""
    sources = {}
    for field in (*DESCRIPTIONS, *OUTPUT_FOR_SETTING):
        if flag_values.get(field) is not None:
            sources[field] = flag_name(field)
        elif env_name(field) in environ:
            sources[field] = env_name(field)
    if "region" not in sources:
        for name in REGION_ENV:
            if environ.get(name):
                sources["region"] = name
                break
    return sources


def resolve_target(
    settings: Settings,
    given: Mapping[str, str],
    *,
    stack_name: str,
    required: Iterable[str] = (),
    environ: Mapping[str, str] = os.environ,
    clients_factory: Callable[[str], Clients] | None = None,
) -> Target:
    """``settings`` (flags and variables already applied, see ``options.settings_from_args``)
    completed from the stack. ``given``: field -> source for what flags/variables set.
    Raises ``MissingSettingError`` naming all sources of every required setting not found."""
    sources = dict(given)
    required = tuple(required)
    # A placeholder given by flag or variable is refused before anything reaches AWS.
    _refuse_placeholders(settings, tuple(f for f in required if f in sources), sources)
    region = _region(settings, sources, environ)
    clients = (clients_factory or Clients)(region)
    stack = StackOutputs(clients.cloudformation, stack_name)
    changes: dict[str, object] = {"region": region}
    missing = []
    for field, output in OUTPUT_FOR_SETTING.items():
        if field in sources:
            continue
        value = stack.get(output)
        if value:
            changes[field] = value
            sources[field] = f"output {output} of stack {stack_name!r}"
            continue
        if field in required:
            missing.append(field)
    if missing:
        raise MissingSettingError(_missing_message(missing, stack, stack_name))
    resolved = replace(settings, **changes)
    _refuse_placeholders(resolved, required, sources)
    return Target(resolved, sources, clients, stack)


def _region(settings: Settings, sources: dict[str, str], environ: Mapping[str, str]) -> str:
    source = sources.get("region")
    if source and source.startswith("--"):
        return settings.region
    for name in REGION_ENV:
        if environ.get(name):
            sources["region"] = name
            return environ[name]
    # The AWS CLI's profile configuration (~/.aws/config or AWS_CONFIG_FILE).
    profile_region = boto3.Session().region_name
    if profile_region:
        sources["region"] = "the AWS profile configuration"
        return profile_region
    raise MissingSettingError(
        "no AWS region: pass --region, or set TRAINPIPE_REGION (or AWS_REGION), or configure "
        "one in the AWS profile; the infra stack cannot supply it, as it is looked up in a region"
    )


def _missing_message(missing: list[str], stack: StackOutputs, stack_name: str) -> str:
    parts = [
        f"{DESCRIPTIONS[field]} (pass {flag_name(field)}, or set {env_name(field)}, or deploy "
        f"the infra stack, whose output {OUTPUT_FOR_SETTING[field]} supplies it)"
        for field in missing
    ]
    why = stack.missing_reason or f"stack {stack_name!r} has no such output"
    return (
        f"missing {'; '.join(parts)}. Looked for stack {stack_name!r} (--stack-name): {why}; "
        "see infra/README.md"
    )


def _refuse_placeholders(
    settings: Settings, fields: tuple[str, ...], sources: Mapping[str, str]
) -> None:
    if "role_arn" in fields and (
        settings.role_arn == PLACEHOLDER_ROLE or f":{PLACEHOLDER_ACCOUNT}:" in settings.role_arn
    ):
        raise UserError(
            f"{sources.get('role_arn', '--role-arn')} {settings.role_arn} is the offline "
            "placeholder of `trainpipe definition`; pass the execution role of your account "
            "(infra stack output ExecutionRoleArn)"
        )
    if "training_image_repository" in fields and f"{PLACEHOLDER_ACCOUNT}.dkr.ecr." in str(
            settings.training_image_repository or ""):
        raise UserError(
            f"{sources.get('training_image_repository', '--training-image-repository')} "
            f"{settings.training_image_repository} is in the offline placeholder account; pass "
            "your ECR repository of trainpipe's training image (infra stack output "
            "TrainingImageRepositoryUri)"
        )
    if "bucket" in fields and settings.bucket == PLACEHOLDER_BUCKET:
        raise UserError(
            f"{sources.get('bucket', '--bucket')} {settings.bucket} is the offline placeholder "
            "of `trainpipe definition`; pass your artifact bucket (infra stack output "
            "ArtifactBucketName)"
        )
