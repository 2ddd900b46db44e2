"""Where the cloud commands get role, bucket, region and model package group from: flags, then
TRAINPIPE_* variables, then the infra stack's outputs; and the errors when none has one."""

from __future__ import annotations

import pytest

from pipeline.cli.main import main
from pipeline.cloud.account import (
    DEPLOY_SETTINGS,
    MissingSettingError,
    given_sources,
    resolve_target,
)
from pipeline.cloud.stack import OUTPUT_FOR_SETTING
from pipeline.errors import UserError
from pipeline.settings import PLACEHOLDER_BUCKET, PLACEHOLDER_ROLE, Settings
from tests.moto_aws import MOTO_CFN_WARNING, deploy_stack

pytestmark = pytest.mark.filterwarnings(MOTO_CFN_WARNING)

ROLE = "arn:aws:iam::123456789012:role/from-flag"


def resolve(settings=None, flags=None, environ=None, stack_name="trainpipe", required=DEPLOY_SETTINGS):
    environ = {"AWS_DEFAULT_REGION": "us-east-1"} if environ is None else environ
    return resolve_target(
        settings or Settings(), given_sources(flags or {}, environ), stack_name=stack_name,
        required=required, environ=environ,
    )


def test_everything_from_the_stack(stack):
    target = resolve()
    for field, output in OUTPUT_FOR_SETTING.items():
        assert getattr(target.settings, field) == stack[output], field
        assert target.sources[field] == f"output {output} of stack 'trainpipe'"
    assert target.settings.region == "us-east-1"


def test_flag_then_environment_then_stack(stack):
    environ = {"AWS_DEFAULT_REGION": "us-east-1", "TRAINPIPE_BUCKET": "env-bucket",
               "TRAINPIPE_ROLE_ARN": "arn:aws:iam::123456789012:role/from-env"}
    # settings_from_args has already applied flags over variables; given_sources says which.
    target = resolve(Settings(bucket="env-bucket", role_arn=ROLE), {"role_arn": ROLE}, environ)
    assert target.settings.role_arn == ROLE and target.sources["role_arn"] == "--role-arn"
    assert target.settings.bucket == "env-bucket" and target.sources["bucket"] == "TRAINPIPE_BUCKET"
    assert target.settings.model_package_group == stack["ModelPackageGroupName"]


def test_a_named_stack(aws):
    outputs = deploy_stack("other-stack", ArtifactPrefix="other")
    target = resolve(stack_name="other-stack")
    assert target.settings.bucket == outputs["ArtifactBucketName"]
    assert target.settings.prefix == "other"


def test_nothing_anywhere_names_all_three_sources_of_each_missing_setting(aws):
    with pytest.raises(MissingSettingError) as info:
        resolve()
    message = str(info.value)
    for flag, variable, output in (
        ("--role-arn", "TRAINPIPE_ROLE_ARN", "ExecutionRoleArn"),
        ("--bucket", "TRAINPIPE_BUCKET", "ArtifactBucketName"),
        ("--model-package-group", "TRAINPIPE_MODEL_PACKAGE_GROUP", "ModelPackageGroupName"),
    ):
        assert flag in message and variable in message and output in message
    assert "stack 'trainpipe' does not exist" in message
    assert "infra/README.md" in message


def test_only_the_missing_ones_are_named(aws):
    environ = {"AWS_DEFAULT_REGION": "us-east-1", "TRAINPIPE_BUCKET": "b"}
    with pytest.raises(MissingSettingError) as info:
        resolve(Settings(bucket="b", role_arn=ROLE), {"role_arn": ROLE}, environ)
    assert "--model-package-group" in str(info.value)
    assert "--bucket" not in str(info.value) and "--role-arn" not in str(info.value)


def test_all_given_needs_no_stack(aws):
    repository = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainpipe-training"
    settings = Settings(role_arn=ROLE, bucket="b", model_package_group="g", training_image_repository=repository)
    target = resolve(settings, {"role_arn": ROLE, "bucket": "b", "model_package_group": "g",
                                "training_image_repository": repository})
    assert (target.settings.role_arn, target.settings.bucket) == (ROLE, "b")
    assert target.settings.kms_key_id is None  # optional, and no stack to take it from


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"role_arn": PLACEHOLDER_ROLE}, "is the offline placeholder"),
        ({"role_arn": "arn:aws:iam::111122223333:role/anything"}, "is the offline placeholder"),
        ({"bucket": PLACEHOLDER_BUCKET}, "is the offline placeholder"),
        ({"training_image_repository": "111122223333.dkr.ecr.us-east-1.amazonaws.com/trainpipe-training"},
         "is in the offline placeholder account"),
    ],
)
def test_placeholders_are_refused(stack, flags, message):
    with pytest.raises(UserError, match=message):
        resolve(Settings(**flags), flags)


def test_no_region_anywhere(aws, monkeypatch, tmp_path):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "TRAINPIPE_REGION"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("[default]\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    with pytest.raises(MissingSettingError, match="no AWS region: pass --region, or set TRAINPIPE_REGION"):
        resolve(environ={})


def test_region_from_the_aws_profile(aws, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    target = resolve(environ={}, required=())
    assert target.settings.region == "eu-west-1"
    assert target.sources["region"] == "the AWS profile configuration"


def test_cli_prints_one_line_and_exits_2(aws, capsys):
    assert main(["upsert"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainpipe upsert: error: missing ")
    assert len(err.strip().splitlines()) == 1


def test_no_credentials_is_a_clear_error(stack, monkeypatch, capsys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    assert main(["executions"]) == 2
    err = capsys.readouterr().err
    assert "no AWS credentials found" in err and "OIDC" in err
    assert "Traceback" not in err


def test_a_placeholder_is_refused_before_anything_reaches_aws(no_network, capsys):
    assert main(["upsert", "--role-arn", PLACEHOLDER_ROLE, "--bucket", "b",
                 "--model-package-group", "g"]) == 2
    assert "--role-arn arn:aws:iam::111122223333:role/trainpipe-sagemaker-execution is the offline placeholder" in (
        capsys.readouterr().err)
