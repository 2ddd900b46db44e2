"""Security of what is sent to SageMaker (issue 6): no credentials in the definition, jobs
network-isolated with data and weights only through input channels, volumes and outputs
encrypted with the KMS key."""

from __future__ import annotations

import ast
import json
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
import yaml

from pipeline.cli.main import main
from pipeline.cloud import endpoint as endpoint_module
from pipeline.cloud.endpoint import Package, default_endpoint_name, resource_name
from pipeline.cloud.secrets import SECRET_KEY, find_secrets
from pipeline.definition.build import build_definition
from pipeline.settings import Settings
from processing import contract as processing
from tests.infra.conftest import _CloudFormationLoader
from tests.moto_aws import MOTO_CFN_WARNING, REGION, TEMPLATE, deployed_definition
from training_entry import contract as training

pytestmark = pytest.mark.filterwarnings(MOTO_CFN_WARNING)

# Shaped like real credentials (AWS's documented example values), so the patterns are tested
# on what they must catch.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEXAMPLE" + "Zm9vYmFy" * 30,
}
KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def jobs(definition: dict) -> dict[str, dict]:
    """Every Training and Processing step's arguments, by step name."""
    return {s["Name"]: s for s in definition["Steps"] if s["Type"] in ("Training", "Processing")}


# --- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kind",
    [
        ("s3://bucket/AKIAIOSFODNN7EXAMPLE/", "an AWS access key id"),
        ('"ASIAY34FZKBOKMUTVV7A"', "an AWS access key id"),
        ('{"key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}', "secret access key"),
        ("token=" + FAKE_CREDENTIALS["AWS_SESSION_TOKEN"], "session token"),
    ],
)
def test_credential_shapes_are_found(text, kind):
    findings = find_secrets(text, environ={})
    assert findings and kind in str(findings[0])
    # The finding never repeats the secret.
    assert text.strip('"{}').split("=")[-1] not in str(findings[0])


def test_any_aws_variable_value_is_found_but_not_region_or_short_values():
    environ = {"AWS_CONTAINER_AUTHORIZATION_TOKEN": "opaque-token-value", "AWS_REGION": "us-east-1",
               "AWS_EC2_METADATA_DISABLED": "true"}
    text = "us-east-1 true opaque-token-value"
    assert [str(f) for f in find_secrets(text, environ)] == [
        "the value of AWS_CONTAINER_AUTHORIZATION_TOKEN (opaq...)"
    ]
    assert find_secrets(text, environ, extra_values=["us-east-1-not"]) != []


def test_content_hashes_and_paths_are_not_mistaken_for_secret_keys():
    assert find_secrets("sha1 " + "0123456789abcdef" * 2 + "01234567", environ={}) == []
    run = "bucket/Team/Data2024/Raw/Digits/v2/abcdefgh"[:40]  # 40 key-shaped characters
    assert len(run) == 40 and SECRET_KEY.search(f"s3://my-{run}")
    assert find_secrets(f"s3://my-{run}", environ={}) == []


def test_the_definition_carries_no_credentials(monkeypatch):
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    text = json.dumps(build_definition(Settings(kms_key_id=KMS_KEY,
                                                init_model_uri="s3://b/weights/model.tar.gz")))
    assert find_secrets(text) == []
    for value in FAKE_CREDENTIALS.values():
        assert value not in text


def test_the_deployed_definition_carries_no_credentials(stack, monkeypatch):
    # moto accepts any credentials: use ones shaped like real ones for the whole upsert.
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    assert main(["upsert"]) == 0
    text = json.dumps(deployed_definition())
    assert find_secrets(text) == []


def test_upsert_refuses_a_definition_with_a_credential(stack, monkeypatch, capsys):
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    leaked = f"s3://{stack['ArtifactBucketName']}/{FAKE_CREDENTIALS['AWS_SECRET_ACCESS_KEY']}/"
    assert main(["upsert", "-p", f"InputDataUri={leaked}"]) == 2
    err = capsys.readouterr().err
    assert "refusing to send the definition: it contains" in err
    assert "the value of AWS_SECRET_ACCESS_KEY" in err
    assert FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in err
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.list_pipelines()["PipelineSummaries"] == []
    s3 = boto3.client("s3", region_name=REGION)
    assert s3.list_objects_v2(Bucket=stack["ArtifactBucketName"]).get("KeyCount") == 0


# --- network isolation, channels ------------------------------------------------------------------


@pytest.mark.parametrize("isolated", [True, False])
def test_every_job_follows_the_network_isolation_setting(isolated):
    definition = build_definition(Settings(network_isolation=isolated))
    found = jobs(definition)
    assert len(found) == 3
    for name, step in found.items():
        arguments = step["Arguments"]
        if step["Type"] == "Training":
            assert arguments.get("EnableNetworkIsolation", False) is isolated, name
            assert arguments["EnableInterContainerTrafficEncryption"] is True, name
        else:
            assert arguments["NetworkConfig"]["EnableNetworkIsolation"] is isolated, name
            assert arguments["NetworkConfig"]["EnableInterContainerTrafficEncryption"] is True, name


def test_network_isolation_is_the_default():
    assert Settings().network_isolation is True


def _s3_uris(node) -> list[str]:
    if isinstance(node, dict):
        return [u for v in node.values() for u in _s3_uris(v)]
    if isinstance(node, list):
        return [u for v in node for u in _s3_uris(v)]
    return [node] if isinstance(node, str) and "s3://" in node else []


@pytest.mark.parametrize("init", [None, "s3://b/previous/model.tar.gz"])
def test_data_code_and_weights_reach_the_jobs_only_through_input_channels(init):
    definition = build_definition(Settings(init_model_uri=init))
    train = next(s for s in jobs(definition).values() if s["Type"] == "Training")["Arguments"]
    channels = {c["ChannelName"] for c in train["InputDataConfig"]}
    # Under network isolation the SDK ships the code as a channel too.
    expected = {*training.DATA_CHANNELS, training.CHANNEL_MANIFEST, "code"}
    assert channels == (expected | {training.CHANNEL_INIT} if init else expected)
    # No S3 location is handed to a container any other way (it could not fetch it).
    assert _s3_uris(train.get("HyperParameters", {})) == []
    assert _s3_uris(train.get("Environment", {})) == []
    for step in jobs(definition).values():
        if step["Type"] == "Processing":
            arguments = step["Arguments"]
            assert _s3_uris(arguments.get("Environment", {})) == []
            assert _s3_uris(arguments["AppSpecification"]) == []
            assert {i["InputName"] for i in arguments["ProcessingInputs"]} >= {"code"}
    preprocess = next(s for s in jobs(definition).values() if s["Type"] == "Processing")
    assert {i["InputName"] for i in preprocess["Arguments"]["ProcessingInputs"]} == {"code", "raw"}
    assert processing.RAW_DATA_DIR in json.dumps(preprocess)


def _s3_locations(node) -> list[str]:
    """Every S3 location in a definition: literal URIs, and the constant head of each
    Std:Join that builds one (["s3:/", bucket, name, {Get: execution id}, ...])."""
    if isinstance(node, dict):
        join = node.get("Std:Join")
        first = join["Values"][0] if join and join["Values"] else None
        if isinstance(first, str) and first.startswith("s3:/"):
            head = []
            for value in join["Values"]:
                if not isinstance(value, str):
                    break
                head.append(value)
            return [join["On"].join(head) + join["On"]]
        return [u for v in node.values() for u in _s3_locations(v)]
    if isinstance(node, list):
        return [u for v in node for u in _s3_locations(v)]
    return [node] if isinstance(node, str) and node.startswith("s3://") else []


def test_every_s3_location_is_under_a_prefix_the_execution_role_may_use():
    # infra/template.yaml grants the role <bucket>/<ArtifactPrefix>/* only
    # (tests/infra/test_template.py); the names differ here on purpose.
    settings = Settings(bucket="bkt", prefix="team-prefix", pipeline_name="team-pipeline",
                        init_model_uri="s3://bkt/team-prefix/models/previous.tar.gz")
    locations = _s3_locations(build_definition(settings))
    assert len(locations) > 10
    assert [u for u in locations if not u.startswith("s3://bkt/team-prefix/")] == []


# --- KMS ---------------------------------------------------------------------------------------


def kms_places(definition: dict) -> dict[str, object]:
    places = {}
    for name, step in jobs(definition).items():
        arguments = step["Arguments"]
        if step["Type"] == "Training":
            places[f"{name} volume"] = arguments["ResourceConfig"].get("VolumeKmsKeyId")
            places[f"{name} output"] = arguments["OutputDataConfig"].get("KmsKeyId")
        else:
            places[f"{name} volume"] = arguments["ProcessingResources"]["ClusterConfig"].get("VolumeKmsKeyId")
            places[f"{name} output"] = arguments["ProcessingOutputConfig"].get("KmsKeyId")
    return places


def test_volumes_and_outputs_are_encrypted_with_the_key_when_set():
    places = kms_places(build_definition(Settings(kms_key_id=KMS_KEY)))
    assert len(places) == 6
    assert set(places.values()) == {KMS_KEY}, places
    assert set(kms_places(build_definition()).values()) == {None}


def test_upsert_uses_the_stacks_key(stack):
    assert main(["upsert"]) == 0
    assert set(kms_places(deployed_definition()).values()) == {stack["KmsKeyArn"]}


@pytest.mark.parametrize("tag", ["team=" + FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                                 "owner=AKIAIOSFODNN7EXAMPLE", "db=postgres://app:hunter2@db.example/prod"])
def test_upsert_refuses_a_tag_with_a_credential(stack, monkeypatch, capsys, tag):
    # Tags reach CreatePipeline/AddTags with the definition: scanned with the same rule.
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    assert main(["upsert", "--tag", tag]) == 2
    err = capsys.readouterr().err
    assert "refusing to send the definition: it contains" in err
    assert tag.split("=", 1)[1] not in err
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.list_pipelines()["PipelineSummaries"] == []


# --- least privilege for trainpipe deploy (infra/template.yaml) ------------------------------------


def _policy_statements(role: str) -> dict[str, dict]:
    """The role's inline statements by Sid, read with the infra tests' CloudFormation loader."""
    template = yaml.load(TEMPLATE.read_text(), Loader=_CloudFormationLoader)  # noqa: S506
    policies = template["Resources"][role]["Properties"]["Policies"]
    return {s["Sid"]: s for p in policies for s in p["PolicyDocument"]["Statement"]}


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _sagemaker_actions_called(source: Path) -> set[str]:
    """The IAM actions of the SageMaker API calls a module makes: ``sagemaker.<operation>(``
    and ``sagemaker.get_paginator("<operation>")``, as boto3 names them (snake_case)."""
    operations = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "sagemaker"):
            continue
        if node.func.attr == "get_paginator":
            operations.add(node.args[0].value)
        elif not node.func.attr.startswith("_"):
            operations.add(node.func.attr)
    # CreateModel etc. tag what they create (Tags=...): SageMaker checks AddTags for that.
    return {"sagemaker:" + "".join(w.title() for w in op.split("_")) for op in operations} | {"sagemaker:AddTags"}


def test_the_ci_role_deploys_only_endpoints_named_after_the_group():
    statements = _policy_statements("CiRole")
    granted = {a for s in statements.values() for a in _as_list(s["Action"])}
    # Every call pipeline/cloud/endpoint.py makes (read from its source, so a new call
    # without its grant fails here, not in CI against AWS), and nothing that deletes.
    called = _sagemaker_actions_called(Path(endpoint_module.__file__))
    assert {"sagemaker:ListModelPackages", "sagemaker:CreateEndpoint", "sagemaker:UpdateEndpoint"} <= called
    assert called <= granted, f"not granted to the CI role: {sorted(called - granted)}"
    assert not [a for a in granted if "Delete" in a]
    deploying = ("CreateNetworkIsolatedModelsFromThem", "ConfigureOnlyTheGroupsModels", "CreateTheGroupsEndpoints",
                 "UpdateOnlyTheGroupsEndpoints", "TagOnlyWhatItCreates", "DescribeTheGroupsEndpoints")
    for sid in deploying:
        names = {r["Fn::Sub"].rsplit(":", 1)[1].split("/", 1)[1] for r in _as_list(statements[sid]["Resource"])}
        # The group's name alone or followed by "-": a bare "<group>*" also matches the
        # resources of another stack's group "<group>-x".
        assert names <= {"${ModelPackageGroupName}", "${ModelPackageGroupName}-*"}, (sid, names)
    # ... and the names the CLI makes by default are inside that scope.
    package = Package("arn", "trainpipe-models", 3, "Approved", "Completed", None, ())
    assert default_endpoint_name("trainpipe-models") == "trainpipe-models"
    assert resource_name("trainpipe-models", package, datetime.now(timezone.utc)).startswith(
        "trainpipe-models-")
    # What is created carries the package tag of this group (the CLI sets it on every create),
    # and only what carries it is updated; tags are set on create, never after.
    in_group = ":model-package/${ModelPackageGroupName}/*"
    assert endpoint_module.PACKAGE_TAG == "trainpipe:model-package"
    for sid in ("CreateNetworkIsolatedModelsFromThem", "ConfigureOnlyTheGroupsModels", "CreateTheGroupsEndpoints"):
        tag = statements[sid]["Condition"]["StringLike"]["aws:RequestTag/trainpipe:model-package"]
        assert tag["Fn::Sub"].endswith(in_group), sid
    update = statements["UpdateOnlyTheGroupsEndpoints"]["Condition"]["StringLike"]
    assert update["sagemaker:ResourceTag/trainpipe:model-package"]["Fn::Sub"].endswith(in_group)
    assert statements["TagOnlyWhatItCreates"]["Condition"] == {"StringEquals": {
        "sagemaker:TaggingAction": ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"]}}
    models = statements["CreateNetworkIsolatedModelsFromThem"]["Condition"]
    assert models["Bool"] == {"sagemaker:NetworkIsolation": "true"}
    assert models["Null"] == {"sagemaker:VpcSubnets": "true"}  # no VPC, so no private registry
    configs = statements["ConfigureOnlyTheGroupsModels"]["Condition"]
    assert configs["ArnLike"]["sagemaker:ModelArn"]["Fn::Sub"].endswith(":model/${ModelPackageGroupName}-*")
    packages = statements["ReadTheGroupsModelPackages"]
    assert packages["Resource"]["Fn::Sub"].endswith(":model-package/${ModelPackageGroupName}/*")
    passes = statements["HandTheExecutionRoleToThePipeline"]
    assert passes["Resource"] == {"Fn::GetAtt": ["ExecutionRole", "Arn"]}
    assert passes["Condition"]["StringEquals"]["iam:PassedToService"] == "sagemaker.amazonaws.com"


def test_the_endpoint_runs_as_the_execution_role_with_image_model_and_log_access():
    statements = _policy_statements("ExecutionRole")
    images = [r["Fn::Sub"] for r in statements["PullTheDeepLearningImages"]["Resource"]]
    assert any(r.endswith("repository/tensorflow-inference") for r in images)
    model_data = statements["ReadWriteTheArtifactPrefix"]
    assert "s3:GetObject" in model_data["Action"]
    assert "kms:Decrypt" in statements["UseTheArtifactKey"]["Action"]
    (logs,) = statements["WriteEndpointLogs"]["Resource"]
    assert logs["Fn::Sub"].endswith("log-group:/aws/sagemaker/Endpoints/${ModelPackageGroupName}*")
