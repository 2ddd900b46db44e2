"""``trainpipe upsert`` against moto: what reaches S3 and SageMaker, and what does not."""

from __future__ import annotations

import boto3
import pytest

from pipeline.cli.main import main
from pipeline.cloud import uploads
from pipeline.cloud.deploy import DESCRIPTION, MANAGED_BY_TAG
from pipeline.data.default import DIGITS_FILENAME, DIGITS_RECORDS
from pipeline.definition import build as D
from pipeline.definition import parameters as P
from pipeline.definition.build import build_definition
from pipeline.definition.bundles import all_bundles
from pipeline.settings import Settings
from tests.moto_aws import MOTO_CFN_WARNING, REGION, deployed_definition

pytestmark = pytest.mark.filterwarnings(MOTO_CFN_WARNING)


@pytest.fixture
def puts(monkeypatch):
    """Every object upsert uploads, by key."""
    sent: list[str] = []
    real_put = uploads.put

    def counting_put(s3, settings, upload):
        sent.append(upload.key)
        real_put(s3, settings, upload)

    monkeypatch.setattr(uploads, "put", counting_put)
    # deploy imported the name; patch it where it is called.
    monkeypatch.setattr("pipeline.cloud.deploy.put", counting_put)
    return sent


def settings_of(stack: dict) -> Settings:
    return Settings(
        region=REGION,
        role_arn=stack["ExecutionRoleArn"],
        bucket=stack["ArtifactBucketName"],
        prefix=stack["ArtifactPrefix"],
        model_package_group=stack["ModelPackageGroupName"],
        kms_key_id=stack["KmsKeyArn"],
        pipeline_name=stack["PipelineName"],
        training_image_repository=stack["TrainingImageRepositoryUri"],
    )


def bucket_keys(bucket: str) -> set[str]:
    s3 = boto3.client("s3", region_name=REGION)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def test_first_upsert_uploads_everything_and_creates_the_pipeline(stack, puts, capsys):
    assert main(["upsert"]) == 0
    out = capsys.readouterr().out
    settings = settings_of(stack)

    expected_code = {
        f"{bundle.key_prefix(settings.prefix)}/{rel}"
        for bundle in all_bundles().values()
        for rel in bundle.objects()
    }
    data_key = f"{settings.prefix}/data/digits/{DIGITS_FILENAME}"
    assert set(puts) == expected_code | {data_key}
    assert bucket_keys(settings.bucket) == expected_code | {data_key}
    # The default data is the whole digits set, header first.
    s3 = boto3.client("s3", region_name=REGION)
    body = s3.get_object(Bucket=settings.bucket, Key=data_key)["Body"].read().decode()
    assert len(body.strip().splitlines()) == DIGITS_RECORDS + 1
    # Uploads name the stack's KMS key.
    head = s3.head_object(Bucket=settings.bucket, Key=data_key)
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"] == stack["KmsKeyArn"]

    # What was sent is exactly the definition built for the stack's settings.
    assert deployed_definition() == build_definition(settings)
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    described = sagemaker.describe_pipeline(PipelineName="trainpipe")
    assert described["RoleArn"] == stack["ExecutionRoleArn"]
    assert described["PipelineDescription"] == DESCRIPTION
    tags = sagemaker.list_tags(ResourceArn=described["PipelineArn"])["Tags"]
    assert {"Key": MANAGED_BY_TAG[0], "Value": MANAGED_BY_TAG[1]} in tags

    # Where every setting came from is printed, and the plan.
    assert "output ExecutionRoleArn of stack 'trainpipe'" in out
    assert "deployed: nothing yet" in out and "new pipeline: 11 steps" in out
    assert f"created {described['PipelineArn']}" in out


def test_second_upsert_uploads_nothing_and_writes_nothing(stack, puts, capsys, monkeypatch):
    assert main(["upsert"]) == 0
    first = len(puts)
    capsys.readouterr()
    calls = []
    real_client = boto3.session.Session.client

    # Record every SageMaker write of the second run.
    def client(self, *args, **kwargs):  # boto3's signature: the factory names service_name
        made = real_client(self, *args, **kwargs)
        if (args[0] if args else kwargs.get("service_name")) == "sagemaker":
            made.meta.events.register(
                "before-call.sagemaker.*",
                lambda model, **_: calls.append(model.name),
            )
        return made

    monkeypatch.setattr(boto3.session.Session, "client", client)
    assert main(["upsert"]) == 0
    out = capsys.readouterr().out
    assert len(puts) == first, "unchanged code and data were uploaded again"
    for name in all_bundles():
        assert f"code bundle {name}: already uploaded" in out
    assert "no changes: the deployed definition is identical" in out
    assert "up to date:" in out
    assert not {"CreatePipeline", "UpdatePipeline", "AddTags"} & set(calls), calls


def test_upsert_with_a_new_parameter_default_updates_without_reupload(stack, puts, capsys):
    assert main(["upsert"]) == 0
    first = len(puts)
    capsys.readouterr()
    assert main(["upsert", "-p", "Epochs=3", "--tag", "team=ml"]) == 0
    out = capsys.readouterr().out
    assert len(puts) == first
    assert "~ Epochs: default 10 -> 3" in out
    assert "updated arn:aws:sagemaker:" in out
    epochs = {p["Name"]: p for p in deployed_definition()["Parameters"]}[P.EPOCHS]
    assert epochs["DefaultValue"] == 3
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    arn = sagemaker.describe_pipeline(PipelineName="trainpipe")["PipelineArn"]
    assert {"Key": "team", "Value": "ml"} in sagemaker.list_tags(ResourceArn=arn)["Tags"]


def test_changed_code_uploads_only_the_new_bundle(stack, puts, monkeypatch):
    assert main(["upsert"]) == 0
    before = set(puts)
    bundles = all_bundles()
    evaluation = bundles["evaluation"]
    changed = type(evaluation)(
        evaluation.name,
        {**evaluation.files, "evaluation/report.py": evaluation.files["evaluation/report.py"] + b"\n# changed\n"},
        evaluation.module,
    )
    monkeypatch.setattr("pipeline.cloud.uploads.all_bundles", lambda model_file=None, tracking_uri=None, framework=None: {**bundles, "evaluation": changed})
    puts.clear()
    assert main(["upsert"]) == 0
    prefix = changed.key_prefix(stack["ArtifactPrefix"])
    assert puts and all(key.startswith(prefix + "/") for key in puts)
    assert not set(puts) & before


def test_a_torn_upload_is_completed(stack, puts):
    assert main(["upsert"]) == 0
    victim = sorted(k for k in puts if "/code/processing-" in k)[0]
    boto3.client("s3", region_name=REGION).delete_object(
        Bucket=stack["ArtifactBucketName"], Key=victim
    )
    puts.clear()
    assert main(["upsert"]) == 0
    assert puts == [victim]


def test_dry_run_writes_nothing(stack, puts, capsys):
    assert main(["upsert", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert puts == []
    assert bucket_keys(stack["ArtifactBucketName"]) == set()
    assert "dry run: nothing was uploaded, created or updated" in out
    assert "code bundle training: upload 1 object(s)" in out
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.list_pipelines()["PipelineSummaries"] == []


def test_own_input_data_is_not_replaced_by_the_default(stack, puts):
    assert main(["upsert", "-p", "InputDataUri=s3://someone-elses-bucket/raw/"]) == 0
    assert not [k for k in puts if "/data/" in k]


def test_default_data_already_there_is_left_alone(stack, puts):
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(
        Bucket=stack["ArtifactBucketName"], Key=f"{stack['ArtifactPrefix']}/data/digits/mine.csv",
        Body=b"f0,label\n1,0\n",
    )
    assert main(["upsert"]) == 0
    assert not [k for k in puts if "/data/" in k]


def test_flags_win_over_the_stack(stack, aws, puts):
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="my-own-bucket")
    assert main(["upsert", "--bucket", "my-own-bucket", "--prefix", "team-a",
                 "--pipeline-name", "team-a-pipeline"]) == 0
    assert puts and all(k.startswith("team-a/") for k in puts)
    assert bucket_keys("my-own-bucket")
    assert bucket_keys(stack["ArtifactBucketName"]) == set()
    definition = deployed_definition("team-a-pipeline")
    assert "s3://my-own-bucket/team-a/" in str(definition)


def test_the_default_image_data_uri_gets_the_digits_as_pngs(stack, puts, capsys):
    from pipeline.data.default import DIGITS_RECORDS

    uri = f"s3://{stack['ArtifactBucketName']}/{stack['ArtifactPrefix']}/data/digits-images/"
    assert main(["upsert", "-p", f"InputDataUri={uri}"]) == 0
    data = sorted(k for k in puts if "/data/" in k)
    assert len(data) == DIGITS_RECORDS
    assert data[0] == f"{stack['ArtifactPrefix']}/data/digits-images/0/0000.png"
    assert (f"default image data (scikit-learn digits as PNGs): upload {DIGITS_RECORDS} object(s) to "
            f"s3://{stack['ArtifactBucketName']}/{stack['ArtifactPrefix']}/data/digits-images/") in capsys.readouterr().out
    puts.clear()
    assert main(["upsert", "-p", f"InputDataUri={uri}"]) == 0
    assert not [k for k in puts if "/data/" in k]


def steps_by_name(definition: dict) -> dict[str, dict]:
    found = {}
    for step in definition["Steps"]:
        found[step["Name"]] = step
        for branch in ("IfSteps", "ElseSteps"):
            found.update(steps_by_name({"Steps": step.get("Arguments", {}).get(branch, [])}))
    return found


def test_the_batch_inference_steps_are_deployed_with_the_stacks_role_and_key(stack, puts, capsys):
    new_data = f"s3://{stack['ArtifactBucketName']}/new-data/"
    assert main(["upsert", "-p", f"BatchInputUri={new_data}", "-p", "BatchInstanceCount=2"]) == 0
    capsys.readouterr()
    deployed = deployed_definition()
    assert deployed == build_definition(settings_of(stack), {P.BATCH_INPUT_URI: new_data,
                                                             P.BATCH_INSTANCE_COUNT: 2})
    defaults = {p["Name"]: p["DefaultValue"] for p in deployed["Parameters"]}
    assert (defaults[P.BATCH_INPUT_URI], defaults[P.BATCH_INSTANCE_COUNT]) == (new_data, 2)
    steps = steps_by_name(deployed)
    model = steps[f"{D.STEP_BATCH_MODEL}-CreateModel"]["Arguments"]
    assert model["ExecutionRoleArn"] == stack["ExecutionRoleArn"]
    for name in (D.STEP_TRANSFORM_IMAGES, D.STEP_TRANSFORM_TABLE):
        args = steps[name]["Arguments"]
        # Predictions land in the stack's bucket, encrypted with its key, as every output does.
        assert args["TransformOutput"]["KmsKeyId"] == stack["KmsKeyArn"]
        assert args["TransformOutput"]["S3OutputPath"]["Std:Join"]["Values"][0] == (
            f"s3://{stack['ArtifactBucketName']}/{stack['ArtifactPrefix']}")
    # Back to no batch inference: the update says which defaults changed.
    assert main(["upsert"]) == 0
    out = capsys.readouterr().out
    assert f"~ {P.BATCH_INPUT_URI}: default" in out and f"~ {P.BATCH_INSTANCE_COUNT}: default 2 -> 1" in out
    # A count below 1 is one line, and the deployed pipeline is left as it was.
    assert main(["upsert", "-p", "BatchInstanceCount=0"]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and "BatchInstanceCount=0: must be at least 1" in captured.err
    assert {p["Name"]: p["DefaultValue"] for p in deployed_definition()["Parameters"]}[P.BATCH_INPUT_URI] == ""


def test_a_training_image_not_in_ecr_is_refused_before_anything_is_uploaded(aws, puts, capsys):
    """SageMaker would find it missing only when the training job starts, after the
    preprocessing step has run and billed."""
    from tests.moto_aws import deploy_stack, push_training_images

    outputs = deploy_stack(push_images=False)
    assert main(["upsert", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"the training image {outputs['TrainingImageRepositoryUri']}:2.14.1-cpu-py310-horovod" in err
    assert "is not in ECR (ImageNotFoundException): push it first" in err and "docs/sagemaker.md" in err
    assert main(["upsert"]) == 2
    assert not puts and not bucket_keys(outputs["ArtifactBucketName"])
    push_training_images(outputs["TrainingImageRepositoryUri"])
    assert main(["upsert"]) == 0
