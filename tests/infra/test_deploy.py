"""The template deployed into moto (over HTTP, as `aws cloudformation deploy` would send it),
and the CLI taking its settings from the stack's outputs.

moto creates the key, bucket, roles and policies; it skips the bucket policy, the model
package group and the OIDC provider (test_template.py checks those as written)."""

from __future__ import annotations

import json
import urllib.parse

import boto3
import pytest

from pipeline.cli.main import main
from pipeline.cloud.stack import OUTPUT_FOR_SETTING
from tests.moto_aws import (
    MOTO_CFN_WARNING,
    REGION,
    TEST_REPOSITORY,
    deploy_stack,
    deployed_definition,
)

pytestmark = pytest.mark.filterwarnings(MOTO_CFN_WARNING)


def role_name(arn: str) -> str:
    return arn.rsplit("/", 1)[1]


def trust_policy(arn: str) -> dict:
    document = boto3.client("iam").get_role(RoleName=role_name(arn))["Role"]["AssumeRolePolicyDocument"]
    return json.loads(urllib.parse.unquote(document)) if isinstance(document, str) else document


def test_deploy_creates_what_the_outputs_name(stack):
    assert set(OUTPUT_FOR_SETTING.values()) <= set(stack)
    s3 = boto3.client("s3", region_name=REGION)
    (rule,) = s3.get_bucket_encryption(Bucket=stack["ArtifactBucketName"])[
        "ServerSideEncryptionConfiguration"]["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": stack["KmsKeyArn"]}
    kms = boto3.client("kms", region_name=REGION)
    # (moto's DescribeKey fails on a key CloudFormation made: it keeps the policy as a dict.)
    assert stack["KmsKeyArn"] in [k["KeyArn"] for k in kms.list_keys()["Keys"]]
    assert kms.get_key_rotation_status(KeyId=stack["KmsKeyArn"])["KeyRotationEnabled"]
    # The CI role's trust, with the repository substituted: main of this repository only.
    (ci_trust,) = trust_policy(stack["CiRoleArn"])["Statement"]
    assert ci_trust["Condition"]["StringEquals"]["token.actions.githubusercontent.com:sub"] == (
        f"repo:{TEST_REPOSITORY}:ref:refs/heads/main")
    (execution_trust,) = trust_policy(stack["ExecutionRoleArn"])["Statement"]
    assert execution_trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    iam = boto3.client("iam")
    names = iam.list_role_policies(RoleName=role_name(stack["ExecutionRoleArn"]))["PolicyNames"]
    assert sorted(names) == ["trainpipe-execution", "trainpipe-pass-own-role"]
    # The training image's repository, named for the pipeline, its tags immutable (moto keeps
    # neither scanning nor the lifecycle policy: test_template.py checks those as written).
    (repository,) = boto3.client("ecr", region_name=REGION).describe_repositories()["repositories"]
    assert repository["repositoryUri"] == stack["TrainingImageRepositoryUri"]
    assert repository["repositoryName"] == "trainpipe-training"
    assert repository["imageTagMutability"] == "IMMUTABLE"


def test_an_existing_oidc_provider_is_reused(aws):
    existing = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
    outputs = deploy_stack(ExistingGitHubOidcProviderArn=existing)
    assert outputs["GitHubOidcProviderArn"] == existing
    (trust,) = trust_policy(outputs["CiRoleArn"])["Statement"]
    assert trust["Principal"] == {"Federated": existing}


def test_the_cli_takes_its_settings_from_a_named_stack(aws, capsys):
    outputs = deploy_stack("ml-team", PipelineName="ml-team-pipeline", ArtifactPrefix="ml-team",
                           ModelPackageGroupName="ml-team-models")
    assert main(["upsert", "--stack-name", "ml-team"]) == 0
    out = capsys.readouterr().out
    for field, output in OUTPUT_FOR_SETTING.items():
        assert f"[output {output} of stack 'ml-team']" in out or field == "pipeline_name"
    definition = deployed_definition("ml-team-pipeline")
    text = json.dumps(definition)
    assert f"s3://{outputs['ArtifactBucketName']}/ml-team/" in text
    assert outputs["KmsKeyArn"] in text
    register = json.dumps([s for s in definition["Steps"] if s["Type"] == "Condition"])
    assert '"ModelPackageGroupName": "ml-team-models"' in register
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.describe_pipeline(PipelineName="ml-team-pipeline")["RoleArn"] == (
        outputs["ExecutionRoleArn"])
    # start/status find the pipeline through the same stack.
    assert main(["start", "--stack-name", "ml-team"]) == 0
    assert main(["executions", "--stack-name", "ml-team"]) == 0
    assert "Succeeded" in capsys.readouterr().out
