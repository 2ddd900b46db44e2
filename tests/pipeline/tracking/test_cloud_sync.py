"""`trainpipe track sync --execution-arn`: a SageMaker execution's condition and registration
steps, which no job logs, logged under the execution's run (pipeline/tracking/cloud_sync.py)
into a SQLite store standing in for the tracking server.

moto (tests/moto_aws.py) answers DescribePipeline, DescribePipelineExecution (every execution
Succeeded) and DescribeModelPackage, but not ListPipelineExecutionSteps: through the command
against moto, the execution's run is logged and ended, and the missing step detail is said in
one line; the steps themselves are read from a botocore Stubber, as the other cloud tests do."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from botocore.stub import Stubber
from mlflow import MlflowClient

from pipeline.cli.main import main
from pipeline.tracking import records as R
from pipeline.tracking.cloud_sync import sync_cloud_execution
from pipeline.tracking.logger import place_empty_store
from pipeline.tracking.target import Target
from tests.moto_aws import REGION, aws, moto_url  # noqa: F401 (fixtures)
from training_entry import contract
from training_entry.tracking import JobRun

ROLE = "arn:aws:iam::123456789012:role/trainpipe"
T0 = dt.datetime(2026, 11, 27, 3, 0, tzinfo=dt.timezone.utc)


def store(tmp_path, monkeypatch) -> tuple[str, MlflowClient]:
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    place_empty_store(tmp_path / "server.db")
    uri = f"sqlite:///{tmp_path / 'server.db'}"
    return uri, MlflowClient(uri)


def runs(client: MlflowClient, experiment: str = "Digits"):
    found = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parents = [r for r in found if R.TAG_PARENT not in r.data.tags]
    return parents, {r.info.run_name: r for r in found if R.TAG_PARENT in r.data.tags}


@pytest.mark.usefixtures("aws")
def test_against_moto_the_executions_run_is_logged_and_ended_and_the_missing_steps_said(tmp_path, monkeypatch, capsys):
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sagemaker.create_pipeline(PipelineName="Digits", RoleArn=ROLE, PipelineDefinition=json.dumps(
        {"Version": "2020-12-01", "Parameters": [], "Steps": []}))
    arn = sagemaker.start_pipeline_execution(PipelineName="Digits")["PipelineExecutionArn"]
    uri, client = store(tmp_path, monkeypatch)
    command = ["track", "sync", "--execution-arn", arn, "--tracking-uri", uri]
    assert main(command) == 1
    out = capsys.readouterr().out.splitlines()
    assert "does not implement ListPipelineExecutionSteps" in out[0]
    assert out[0].endswith("its condition and registration steps are not logged")
    assert out[1] == f"execution {arn}: logged the execution's run, the execution's end"
    (parent,), children = runs(client)
    assert parent.data.tags[R.TAG_EXECUTION] == arn.rsplit("/", 1)[-1] and parent.info.status == "FINISHED"
    assert children == {}
    assert main(command) == 1 and capsys.readouterr().out.splitlines()[1] == f"execution {arn}: already logged"


ARN = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/digits/execution/abc123def456"
PACKAGE = "arn:aws:sagemaker:us-east-1:123456789012:model-package/digits-models/3"


def stubbed_execution(stubber: Stubber) -> None:
    arn = {"PipelineExecutionArn": ARN}
    stubber.add_response("describe_pipeline_execution", {
        "PipelineExecutionArn": ARN, "PipelineArn": "arn:aws:sagemaker:us-east-1:123456789012:pipeline/digits",
        "PipelineExecutionStatus": "Succeeded", "CreationTime": T0, "LastModifiedTime": T0 + dt.timedelta(minutes=20)},
        arn)
    # SageMaker lowercases the name in the pipeline's ARN: the experiment is named as the pipeline.
    stubber.add_response("describe_pipeline", {"PipelineName": "Digits"},
                         {"PipelineName": "arn:aws:sagemaker:us-east-1:123456789012:pipeline/digits"})
    step = {"StartTime": T0 + dt.timedelta(minutes=18), "EndTime": T0 + dt.timedelta(minutes=19)}
    stubber.add_response("list_pipeline_execution_steps", {"PipelineExecutionSteps": [
        {"StepName": "RegisterModel-RegisterModel", "StepStatus": "Succeeded", **step,
         "Metadata": {"RegisterModel": {"Arn": PACKAGE}}},
        {"StepName": "AccuracyCondition", "StepStatus": "Succeeded", **step, "Metadata": {"Condition": {"Outcome": "True"}}},
        {"StepName": "TrainModel", "StepStatus": "Succeeded", **step,
         "Metadata": {"TrainingJob": {"Arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/pipelines-x"}}},
    ]}, {**arn, "SortOrder": "Ascending"})


def test_the_condition_and_the_registration_under_the_executions_run_never_twice(tmp_path, monkeypatch):
    uri, client = store(tmp_path, monkeypatch)
    # The training job's chief came first (training_entry/tracking.py): it made the execution's run.
    job = JobRun.start({"epochs": 2}, {"MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": "Digits",
                                       contract.TRACKING_EXECUTION_ENV: "abc123def456",
                                       "TRAINING_JOB_NAME": "pipelines-x"})
    job.end()
    sagemaker = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sagemaker) as stubber:
        stubbed_execution(stubber)
        stubber.add_response("describe_model_package", {
            "ModelPackageName": "digits-models", "ModelPackageGroupName": "digits-models", "ModelPackageVersion": 3,
            "ModelPackageArn": PACKAGE, "ModelApprovalStatus": "Approved", "CreationTime": T0,
            "ModelPackageStatus": "Completed", "ModelPackageStatusDetails": {"ValidationStatuses": []},
            "InferenceSpecification": {"Containers": [{"Image": "img", "ModelDataUrl": "s3://bucket/model.tar.gz"}],
                                       "SupportedContentTypes": ["application/json"],
                                       "SupportedResponseMIMETypes": ["application/json"]}},
            {"ModelPackageName": PACKAGE})
        done, missing = sync_cloud_execution(sagemaker, ARN, Target(uri, embedded=False), client)
        assert missing is None
        assert done == ["step RegisterModel-RegisterModel", "step AccuracyCondition", "the execution's end"]
        stubbed_execution(stubber)
        assert sync_cloud_execution(sagemaker, ARN, Target(uri, embedded=False), client) == ([], None)
    (parent,), children = runs(client)
    assert parent.info.status == "FINISHED" and parent.info.end_time == int((T0 + dt.timedelta(minutes=20)).timestamp() * 1000)
    assert set(children) == {"pipelines-x", "AccuracyCondition", "RegisterModel-RegisterModel"}
    condition = children["AccuracyCondition"]
    assert condition.data.tags[R.TAG_OUTCOME] == "true" and condition.info.status == "FINISHED"
    register = children["RegisterModel-RegisterModel"]
    assert register.data.tags[R.TAG_MODEL_PACKAGE] == PACKAGE
    assert {r.data.tags[R.TAG_PARENT] for r in children.values()} == {parent.info.run_id}
    (version,) = client.search_model_versions("name='digits-models'")
    assert version.run_id == register.info.run_id and version.source == "s3://bucket/model.tar.gz"
    assert version.tags["sagemaker.model_approval_status"] == "Approved" and version.tags[R.TAG_MODEL_PACKAGE] == PACKAGE
