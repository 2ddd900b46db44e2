"""``trainpipe deploy`` against moto: a real-time endpoint from a registered model package,
created on the first deploy and updated in place by the next; refusals before any write."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import boto3
import pytest
from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

from pipeline.cli.main import main
from pipeline.cloud import endpoint as ep
from pipeline.errors import UserError
from pipeline.settings import INFERENCE_INSTANCE_TYPE
from tests.moto_aws import MOTO_CFN_WARNING, REGION

pytestmark = pytest.mark.filterwarnings(MOTO_CFN_WARNING)

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.14-cpu"


def _update_endpoint(self):
    """UpdateEndpoint as SageMaker documents it (moto 5.2.5 lacks the action): the endpoint
    keeps its name and ARN and takes the new config's variants."""
    backend = sagemaker_backends[self.current_account][self.region]
    name, config_name = self._get_param("EndpointName"), self._get_param("EndpointConfigName")
    if name not in backend.endpoints:
        raise ValidationError(message=f"Could not find endpoint '{name}'.")
    config = backend.describe_endpoint_config(config_name)
    endpoint = backend.endpoints[name]
    endpoint.endpoint_config_name = config_name
    variants = config["ProductionVariants"]
    endpoint.production_variants = endpoint._process_production_variants(variants)
    return ActionResult({"EndpointArn": endpoint.arn})


@pytest.fixture
def registry(stack, monkeypatch):
    """The stack, its model package group (moto's CloudFormation skips that resource), and a
    function that registers a version the way the pipeline's RegisterModel step does."""
    monkeypatch.setattr(SageMakerResponse, "update_endpoint", _update_endpoint, raising=False)
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    group = stack["ModelPackageGroupName"]
    sagemaker.create_model_package_group(ModelPackageGroupName=group)

    def register(status: str = "Approved") -> str:
        return sagemaker.create_model_package(
            ModelPackageGroupName=group,
            ModelApprovalStatus=status,
            InferenceSpecification={
                "Containers": [{
                    "Image": IMAGE,
                    "ModelDataUrl": f"s3://{stack['ArtifactBucketName']}/trainpipe/model.tar.gz",
                }],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/json"],
                "SupportedRealtimeInferenceInstanceTypes": [INFERENCE_INSTANCE_TYPE],
                "SupportedTransformInstanceTypes": [INFERENCE_INSTANCE_TYPE],
            },
        )["ModelPackageArn"]

    return stack, sagemaker, register


def written(sagemaker) -> dict[str, list[str]]:
    return {
        "models": sorted(m["ModelName"] for m in sagemaker.list_models()["Models"]),
        "configs": sorted(c["EndpointConfigName"]
                          for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]),
        "endpoints": sorted(e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]),
    }


def served_package(sagemaker, endpoint: str) -> tuple[str, dict]:
    described = sagemaker.describe_endpoint(EndpointName=endpoint)
    config = sagemaker.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
    variant = config["ProductionVariants"][0]
    model = sagemaker.describe_model(ModelName=variant["ModelName"])
    return model["Containers"][0]["ModelPackageName"], variant


def test_first_deploy_creates_the_endpoint_from_the_latest_approved_package(registry, capsys):
    stack, sagemaker, register = registry
    register("Approved")
    latest_approved = register("Approved")
    register("PendingManualApproval")  # newer, but not approved: not the default

    assert main(["deploy", "--wait", "--poll-seconds", "0"]) == 0
    out = capsys.readouterr().out
    endpoint = stack["ModelPackageGroupName"]
    assert f"create endpoint {endpoint!r}" in out
    assert "bills per instance-hour" in out and "InService" in out
    package, variant = served_package(sagemaker, endpoint)
    assert package == latest_approved
    assert variant["InstanceType"] == INFERENCE_INSTANCE_TYPE
    assert variant["InitialInstanceCount"] == 1
    (model,) = written(sagemaker)["models"]
    described = sagemaker.describe_model(ModelName=model)
    assert described["ExecutionRoleArn"] == stack["ExecutionRoleArn"]
    assert model.startswith(f"{endpoint}-v2-")


def test_a_new_version_updates_the_same_endpoint_with_a_new_config(registry, capsys):
    stack, sagemaker, register = registry
    first = register("Approved")
    assert main(["deploy"]) == 0
    endpoint = stack["ModelPackageGroupName"]
    before = sagemaker.describe_endpoint(EndpointName=endpoint)

    second = register("Approved")
    assert main(["deploy", "--instance-count", "2", "--wait", "--poll-seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert f"serving {first}" in out and f"update endpoint {endpoint!r} in place" in out
    after = sagemaker.describe_endpoint(EndpointName=endpoint)
    assert after["EndpointArn"] == before["EndpointArn"]
    assert after["EndpointConfigName"] != before["EndpointConfigName"]
    package, variant = served_package(sagemaker, endpoint)
    assert package == second and variant["InitialInstanceCount"] == 2
    assert len(written(sagemaker)["configs"]) == 2
    assert written(sagemaker)["endpoints"] == [endpoint]


def test_deploying_what_is_already_served_writes_nothing(registry, capsys):
    _, sagemaker, register = registry
    register("Approved")
    assert main(["deploy"]) == 0
    before = written(sagemaker)
    assert main(["deploy"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert written(sagemaker) == before


def test_no_approved_package_is_refused_naming_how_to_approve(registry, capsys):
    _, sagemaker, register = registry
    register("PendingManualApproval")
    assert main(["deploy"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "no Approved version (the latest, v1, is PendingManualApproval)" in err
    assert "aws sagemaker update-model-package" in err and "--model-approval-status Approved" in err
    assert written(sagemaker) == {"models": [], "configs": [], "endpoints": []}


def test_an_unapproved_version_is_refused_unless_allowed(registry, capsys):
    stack, sagemaker, register = registry
    arn = register("Rejected")
    assert main(["deploy", "--version", "1"]) == 2
    err = capsys.readouterr().err
    assert "is Rejected, not Approved" in err and "--allow-unapproved" in err and arn in err
    assert written(sagemaker) == {"models": [], "configs": [], "endpoints": []}

    assert main(["deploy", "--model-package-arn", arn, "--allow-unapproved"]) == 0
    assert served_package(sagemaker, stack["ModelPackageGroupName"])[0] == arn


@pytest.mark.parametrize("argv, message", [
    (["--version", "7"], "has no version 7: its versions are 1"),
    (["--model-package-group", "nobody-registered-here"], "has no model packages"),
])
def test_a_missing_package_is_refused_before_any_write(registry, capsys,
                                                                            argv, message):
    _, sagemaker, register = registry
    register("Approved")
    assert main(["deploy", *argv]) == 2
    assert message in capsys.readouterr().err
    assert written(sagemaker) == {"models": [], "configs": [], "endpoints": []}


@pytest.mark.parametrize("argv, message", [
    (["--instance-type", "ml.nonesuch.large"], "not an instance type trainpipe knows"),
    (["--instance-type", "local"], "not an instance type trainpipe knows"),
    (["--instance-count", "0"], "must be at least 1"),
    (["--endpoint-name", "bad_name"], "letters, digits and hyphens"),
])
def test_bad_flags_are_refused_before_any_aws_call(monkeypatch, capsys, argv, message):
    # No moto, no credentials, no region: the flags are checked first.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    assert main(["deploy", *argv]) == 2
    assert message in capsys.readouterr().err


def test_dry_run_prints_the_plan_and_writes_nothing(registry, capsys):
    stack, sagemaker, register = registry
    arn = register("Approved")
    assert main(["deploy", "--dry-run", "--endpoint-name", "trainpipe-models-staging"]) == 0
    out = capsys.readouterr().out
    assert arn in out
    assert "create model 'trainpipe-models-staging-v1-" in out
    assert "create endpoint 'trainpipe-models-staging'" in out
    assert "dry run: nothing was created or updated" in out
    assert written(sagemaker) == {"models": [], "configs": [], "endpoints": []}


def test_the_command_deploys_through_its_own_process(registry):
    # The real entry point, environment and exit status (moto is reached over HTTP through
    # AWS_ENDPOINT_URL, which the fixture set and the child inherits).
    stack, sagemaker, register = registry
    register("Approved")
    deploy = [sys.executable, "-m", "pipeline", "deploy", "--wait", "--poll-seconds", "0"]
    done = subprocess.run(deploy, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "InService, serving trainpipe-models v1" in done.stdout
    assert written(sagemaker)["endpoints"] == [stack["ModelPackageGroupName"]]

def test_a_type_the_package_does_not_list_is_deployed_with_a_note(registry, capsys):
    stack, sagemaker, register = registry
    register("Approved")
    assert main(["deploy", "--instance-type", "ml.c5.xlarge"]) == 0
    out = capsys.readouterr().out
    note = f"the package lists {INFERENCE_INSTANCE_TYPE} for real-time inference, not ml.c5.xlarge"
    assert note in out
    _, variant = served_package(sagemaker, stack["ModelPackageGroupName"])
    assert variant["InstanceType"] == "ml.c5.xlarge"


def test_a_failed_endpoint_is_reported_and_not_updated(registry, capsys):
    stack, sagemaker, register = registry
    register("Approved")
    assert main(["deploy"]) == 0
    endpoint = stack["ModelPackageGroupName"]
    account = stack["ExecutionRoleArn"].split(":")[4]
    # moto's endpoints are InService at once: make this one fail as a real one can.
    fake = sagemaker_backends[account][REGION].endpoints[endpoint]
    fake.endpoint_status, fake.failure_reason = "Failed", "The primary container\nfailed the ping."
    described = ep.wait_for_endpoint(sagemaker, endpoint, poll_seconds=0)
    assert described["EndpointStatus"] == "Failed"
    # SageMaker updates only an InService endpoint: the next deploy says what to do instead.
    register("Approved")
    before = written(sagemaker)
    assert main(["deploy"]) == 2
    err = capsys.readouterr().err
    assert f"endpoint {endpoint!r} is Failed" in err
    assert f"aws sagemaker delete-endpoint --endpoint-name {endpoint}" in err
    assert written(sagemaker) == before


def test_wait_prints_each_status_once_and_stops_at_a_final_one():
    answers = iter(["Creating", "Creating", "Updating", "Failed"])

    class Endpoints:
        def describe_endpoint(self, EndpointName):
            return {"EndpointStatus": next(answers), "FailureReason": "bad\n  image"}

    seen = []
    described = ep.wait_for_endpoint(Endpoints(), "e", poll_seconds=0,
                                     on_status=lambda status, _: seen.append(status))
    assert seen == ["Creating", "Updating", "Failed"]
    plan = ep.DeployPlan(ep.DeployRequest(group="g", role_arn="r"), None, "e", "m", "c", None)
    assert ep.outcome(plan, described) == "Failed: bad image"
    rolled_back = {"EndpointStatus": "InService", "EndpointConfigName": "old", "FailureReason": "x"}
    assert ep.outcome(plan, rolled_back) == "the update failed and rolled back to config old: x"
    assert ep.outcome(plan, {"EndpointStatus": "InService", "EndpointConfigName": "c"}) is None


def test_wait_gives_up_after_the_timeout():
    class Endpoints:
        def describe_endpoint(self, EndpointName):
            return {"EndpointStatus": "Creating"}

    times = iter([0.0, 0.0, 10.0, 700.0, 700.0])
    with pytest.raises(UserError, match="still Creating after 600 s"):
        ep.wait_for_endpoint(Endpoints(), "e", poll_seconds=0, timeout_seconds=600,
                             clock=lambda: next(times), sleep=lambda s: None)


def test_names_are_new_per_deploy_and_fit_sagemakers_limit():
    package = ep.Package("arn", "g", 12, "Approved", "Completed", None, ())
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    now = now.replace(microsecond=678900)
    name = ep.resource_name("trainpipe-models", package, now)
    assert name == "trainpipe-models-v12-20260102-030405-678"
    long = ep.resource_name("a" * 63, package, now)
    assert len(long) == 63 and long.endswith("-v12-20260102-030405-678")
    assert ep.NAME_PATTERN.match(long)


def test_wait_after_an_update_does_not_stop_at_the_old_config_still_in_service():
    answers = iter([
        {"EndpointStatus": "InService", "EndpointConfigName": "old"},  # not yet Updating
        {"EndpointStatus": "Updating", "EndpointConfigName": "old"},
        {"EndpointStatus": "InService", "EndpointConfigName": "new"},
    ])

    class Endpoints:
        def describe_endpoint(self, EndpointName):
            return next(answers)

    seen = []
    described = ep.wait_for_endpoint(Endpoints(), "e", poll_seconds=0, new_config="new",
                                     on_status=lambda status, _: seen.append(status))
    assert described["EndpointConfigName"] == "new"
    assert seen == ["InService", "Updating", "InService"]


def test_a_tag_with_a_credential_is_refused_before_any_write(registry, monkeypatch, capsys):
    _, sagemaker, register = registry
    register("Approved")
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    assert main(["deploy", "--tag", f"team={secret}"]) == 2
    err = capsys.readouterr().err
    assert "refusing to tag the endpoint" in err and secret not in err
    assert written(sagemaker) == {"models": [], "configs": [], "endpoints": []}
