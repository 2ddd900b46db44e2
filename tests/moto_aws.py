"""A local moto server for the tests that talk to AWS: every call goes over HTTP to 127.0.0.1
through ``AWS_ENDPOINT_URL`` (boto3 honours it), so the code under test runs unpatched.

moto stores pipelines but never runs them, and every execution it makes is Succeeded; the
tests check what trainpipe sends, and stub other answers with botocore's Stubber.

Used by the conftest of each test folder that needs it (fixtures re-exported there).
"""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import boto3
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = REPO_ROOT / "infra" / "template.yaml"
TEST_REPOSITORY = "example-org/trainpipe"
REGION = "us-east-1"

# moto's CloudFormation lacks a few resource types of the template (the bucket policy, the
# model package group, the OIDC provider): it skips them with this warning. The template's
# own tests check those resources statically.
MOTO_CFN_WARNING = "ignore:Tried to parse:UserWarning"


@pytest.fixture(scope="session")
def moto_url():
    from moto.server import ThreadedMotoServer

    # The server logs every request, and a stack trace for actions moto lacks.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws(moto_url, monkeypatch):
    """A fresh, empty moto account for one test; returns the endpoint URL."""
    request = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST", data=b"")
    urllib.request.urlopen(request, timeout=30).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    # The SDK's import turns the root logger to INFO (see pipeline/cli/main.py); keep test output
    # to what trainpipe prints.
    logging.getLogger().setLevel(logging.WARNING)
    return moto_url


def push_training_images(repository_uri: str) -> None:
    """What CI's training-image job leaves in the stack's ECR repository: the CPU and GPU
    images the definition names (moto keeps the manifest; there are no layers)."""
    from pipeline.definition.training_image import TrainingImage, base_image
    from pipeline.settings import FRAMEWORK_VERSION, PY_VERSION

    ecr = boto3.client("ecr", region_name=REGION)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                           "config": {}, "layers": []})
    for instance_type in ("ml.c5.2xlarge", "ml.p3.2xlarge"):
        image = TrainingImage(base_image(REGION, instance_type, FRAMEWORK_VERSION, PY_VERSION), repository_uri)
        ecr.put_image(repositoryName=repository_uri.split("/", 1)[1], imageManifest=manifest, imageTag=image.tag)


def deploy_stack(name: str = "trainpipe", repository: str = TEST_REPOSITORY, push_images: bool = True,
                 **parameters) -> dict:
    """Create the infra stack in moto, with the training images pushed unless ``push_images``
    is False; returns its outputs."""
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(
        StackName=name,
        TemplateBody=TEMPLATE.read_text(),
        Parameters=[
            {"ParameterKey": k, "ParameterValue": v}
            for k, v in {"GitHubRepository": repository, **parameters}.items()
        ],
        Capabilities=["CAPABILITY_IAM"],
    )
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    if push_images:
        push_training_images(outputs["TrainingImageRepositoryUri"])
    return outputs


@pytest.fixture
def stack(aws):
    """The infra stack deployed in moto under the default name; its outputs."""
    return deploy_stack()


def deployed_definition(name: str = "trainpipe") -> dict:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    return json.loads(sagemaker.describe_pipeline(PipelineName=name)["PipelineDefinition"])
