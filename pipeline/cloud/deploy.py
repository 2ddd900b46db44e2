"""upsert: build the definition for real settings, check it, scan it, diff it against what is
deployed, upload what the bucket lacks, then create or update the pipeline.

``plan_upsert`` only reads (the bucket listing and the deployed pipeline): ``--dry-run`` stops
after it. ``apply_upsert`` writes, uploads first, so a pipeline never points at code that is
not there yet.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from botocore.exceptions import ClientError

from pipeline.cloud.account import Target
from pipeline.cloud.aws import aws_errors, error_code, is_not_found
from pipeline.cloud.diff import definition_diff
from pipeline.cloud.secrets import find_secrets
from pipeline.cloud.uploads import Upload, bundle_uploads, default_data_uploads, put
from pipeline.definition import parameters as P
from pipeline.errors import UserError

DESCRIPTION = "trainpipe: preprocess, Horovod/MPI TensorFlow training, evaluate, register"
# On every pipeline trainpipe creates, so an account's pipelines say where they came from.
MANAGED_BY_TAG = ("trainpipe:managed-by", "trainpipe")


class SecretInDefinitionError(UserError):
    """The definition would carry a credential to SageMaker."""


def training_images(definition: dict, repository: str) -> list[str]:
    """The ``TrainingImage`` URIs in ``repository`` that ``definition`` names, at any depth
    (a tuning step's training job definition holds one too)."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            image = node.get("TrainingImage")
            if isinstance(image, str) and image.startswith(repository + ":") and image not in found:
                found.append(image)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(definition)
    return found


def check_training_images(ecr, definition: dict, repository: str) -> None:
    """SageMaker pulls the training image only when the training job starts, after the steps
    before it have run and billed: refuse, before anything is uploaded, a definition whose
    image of trainpipe's repository is not in ECR yet."""
    for image in training_images(definition, repository):
        name, tag = image.split("/", 1)[1].rsplit(":", 1)
        try:
            ecr.describe_images(repositoryName=name, imageIds=[{"imageTag": tag}])
        except ClientError as error:
            if error_code(error) not in ("ImageNotFoundException", "RepositoryNotFoundException"):
                with aws_errors(f"looking up the training image {image}"):
                    raise
            raise UserError(
                f"the training image {image} is not in ECR ({error_code(error)}): push it first "
                "(CI's training-image job does on a push to main; by hand: docs/sagemaker.md, "
                "The training image)") from None


@dataclass
class UpsertPlan:
    target: Target
    definition: dict
    definition_text: str
    deployed: dict | None  # the definition now deployed, None if there is no pipeline yet
    deployed_role_arn: str | None
    pipeline_arn: str | None
    uploads: list[Upload]
    unchanged_bundles: list[str]
    diff: str
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def creates(self) -> bool:
        return self.deployed is None

    @property
    def changes_pipeline(self) -> bool:
        return (
            self.creates
            or self.deployed != self.definition
            or self.deployed_role_arn != self.target.settings.role_arn
        )


def deployed_pipeline(sagemaker, name: str) -> dict | None:
    """DescribePipeline's answer, or None when there is no such pipeline."""
    with aws_errors(f"reading pipeline {name!r}"):
        try:
            return sagemaker.describe_pipeline(PipelineName=name)
        except ClientError as error:
            if is_not_found(error):
                return None
            raise


def plan_upsert(
    target: Target,
    overrides: Mapping[str, object],
    tags: Mapping[str, str] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> UpsertPlan:
    from pipeline.definition.build import build_definition
    from pipeline.definition.schema_check import check_definition

    settings = target.settings
    definition = build_definition(settings, overrides)
    check_definition(definition)
    if settings.training_image_repository:
        check_training_images(target.clients.client("ecr"), definition, settings.training_image_repository)
    text = json.dumps(definition)
    all_tags = {MANAGED_BY_TAG[0]: MANAGED_BY_TAG[1], **settings.tags, **(tags or {})}
    # The tags go to CreatePipeline/AddTags with the definition: the same scan, the same rule.
    findings = find_secrets(text + "\n" + json.dumps(all_tags), environ,
                            target.clients.credential_values())
    if findings:
        raise SecretInDefinitionError(
            "refusing to send the definition: it contains "
            + "; ".join(str(f) for f in findings)
            + ". Pass credentials through the environment or the execution role, never as "
            "parameters, settings or tags"
        )
    s3 = target.clients.s3
    with aws_errors(f"listing s3://{settings.bucket}/{settings.prefix}/"):
        framework = P.BY_NAME[P.FRAMEWORK].parse(overrides.get(P.FRAMEWORK, P.BY_NAME[P.FRAMEWORK].default))
        uploads, unchanged = bundle_uploads(s3, settings, framework=framework)
        input_data_uri = next(
            p["DefaultValue"] for p in definition["Parameters"] if p["Name"] == P.INPUT_DATA_URI
        )
        uploads.extend(default_data_uploads(s3, settings, input_data_uri))
    described = deployed_pipeline(target.clients.sagemaker, settings.pipeline_name)
    deployed = json.loads(described["PipelineDefinition"]) if described else None
    return UpsertPlan(
        target=target,
        definition=definition,
        definition_text=text,
        deployed=deployed,
        deployed_role_arn=described.get("RoleArn") if described else None,
        pipeline_arn=described.get("PipelineArn") if described else None,
        uploads=uploads,
        unchanged_bundles=unchanged,
        diff=definition_diff(deployed, definition),
        tags=all_tags,
    )


def apply_upsert(plan: UpsertPlan) -> str:
    """Upload, then create or update; returns the pipeline ARN."""
    settings = plan.target.settings
    clients = plan.target.clients
    for upload in plan.uploads:
        with aws_errors(f"uploading s3://{settings.bucket}/{upload.key}"):
            put(clients.s3, settings, upload)
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(plan.tags.items())]
    sagemaker = clients.sagemaker
    if plan.creates:
        with aws_errors(f"creating pipeline {settings.pipeline_name!r}"):
            answer = sagemaker.create_pipeline(
                PipelineName=settings.pipeline_name,
                PipelineDefinition=plan.definition_text,
                PipelineDescription=DESCRIPTION,
                RoleArn=settings.role_arn,
                Tags=tag_list,
            )
        return answer["PipelineArn"]
    if plan.changes_pipeline:
        with aws_errors(f"updating pipeline {settings.pipeline_name!r}"):
            sagemaker.update_pipeline(
                PipelineName=settings.pipeline_name,
                PipelineDefinition=plan.definition_text,
                PipelineDescription=DESCRIPTION,
                RoleArn=settings.role_arn,
            )
    # UpdatePipeline takes no tags: add the ones that are missing or differ (AddTags
    # overwrites a key's value), so an upsert with nothing to change writes nothing.
    with aws_errors(f"tagging pipeline {settings.pipeline_name!r}"):
        current = {
            tag["Key"]: tag["Value"]
            for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=plan.pipeline_arn)
            for tag in page.get("Tags", [])
        }
        wanted = [tag for tag in tag_list if current.get(tag["Key"]) != tag["Value"]]
        if wanted:
            sagemaker.add_tags(ResourceArn=plan.pipeline_arn, Tags=wanted)
    return plan.pipeline_arn
