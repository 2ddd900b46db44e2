"""Model and Transform steps in the local runner (pipeline/local/inference_steps.py,
jobs/transform.py): a TensorFlow Serving model, records on two instances, joined and filtered.

Slow: each Transform starts a model server per instance (TensorFlow, a few seconds)."""

from __future__ import annotations

import json
import tarfile

import pytest

from pipeline.local.runner import PipelineRunner, RunOptions
from pipeline.local.store.storage import LocalStorage
from tests.pipeline.local.test_runner import Capture
from tests.serving.conftest import TABLE_CLASSES, save_table_model

pytestmark = pytest.mark.slow
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.14-cpu"
ROWS = [f"a-{i},5.{i},3.5,1.4,0.{i}" for i in range(7)]


def _definition(transform: dict) -> dict:
    return {"Version": "2020-12-01", "Steps": [
        {"Name": "CreateModel", "Type": "Model", "Arguments": {
            "ExecutionRoleArn": "arn:aws:iam::111122223333:role/R",
            "PrimaryContainer": {"Image": IMAGE, "Environment": {}, "ModelDataUrl": "s3://bkt/model/model.tar.gz"}}},
        {"Name": "Score", "Type": "Transform", "Arguments": {
            "ModelName": {"Get": "Steps.CreateModel.ModelName"},
            "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bkt/in/"}},
                               "ContentType": "text/csv", "SplitType": "Line"},
            "TransformOutput": {"S3OutputPath": "s3://bkt/out", "AssembleWith": "Line", "Accept": "application/json"},
            "TransformResources": {"InstanceCount": 2, "InstanceType": "ml.m5.large"}, **transform}},
        {"Name": "Check", "Type": "Condition", "Arguments": {
            "Conditions": [{"Type": "Equals", "LeftValue": {"Get": "Steps.Score.TransformOutput.S3OutputPath"},
                            "RightValue": "s3://bkt/out"}],
            "IfSteps": [], "ElseSteps": [{"Name": "Wrong", "Type": "Fail", "Arguments": {"ErrorMessage": "no"}}]}},
    ]}


@pytest.fixture(scope="module")
def model_archive(tmp_path_factory):
    saved = tmp_path_factory.mktemp("saved")
    save_table_model(str(saved))
    archive = saved / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(saved / "1", "1")
    return archive


def _run(tmp_path, model_archive, transform: dict):
    storage = LocalStorage(tmp_path / "store")
    storage.put_file(model_archive, "s3://bkt/model/model.tar.gz")
    storage.put_bytes(("\n".join(ROWS[:3]) + "\n").encode(), "s3://bkt/in/one.csv")
    storage.put_bytes(("\n".join(ROWS[3:5]) + "\n").encode(), "s3://bkt/in/two.csv")
    storage.put_bytes(("\n".join(ROWS[5:]) + "\n").encode(), "s3://bkt/in/sub/three.csv")
    options = RunOptions(workdir=tmp_path, storage=storage, echo=False, stream=Capture())
    record = PipelineRunner(_definition(transform), "infer", options).run()
    return storage, record


def test_records_joined_with_their_input_on_two_instances(tmp_path, model_archive):
    storage, record = _run(tmp_path, model_archive, {
        "BatchStrategy": "MultiRecord", "MaxPayloadInMB": 1,
        "DataProcessing": {"InputFilter": "$[1:]", "JoinSource": "Input", "OutputFilter": "$[0,-1]"}})
    assert record.status == "Succeeded", [(s.name, s.failure_reason) for s in record.steps]
    assert storage.list("s3://bkt/out/") == ["s3://bkt/out/one.csv.out", "s3://bkt/out/sub/three.csv.out",
                                           "s3://bkt/out/two.csv.out"]
    lines = [json.loads(line) for uri in storage.list("s3://bkt/out/") for line in storage.read_bytes(uri).splitlines()]
    assert sorted(line[0] for line in lines) == sorted(row.split(",")[0] for row in ROWS)
    assert all(line[1]["classes"] in TABLE_CLASSES and len(line[1]["probabilities"]) == 3 for line in lines)
    score = record.step("Score")
    assert score.properties["TransformJobStatus"] == "Completed"
    assert "3 object(s) under s3://bkt/out" in score.detail
    job_log = (tmp_path / "runs").glob("*/jobs/*/job.log")
    assert "on 2 instance(s): [2, 1]" in next(job_log).read_text()
    assert record.step("CreateModel").properties["ModelName"].startswith("infer-CreateModel-")


def test_single_records_as_the_model_answers_them(tmp_path, model_archive):
    storage, record = _run(tmp_path, model_archive, {"BatchStrategy": "SingleRecord",
                                                     "DataProcessing": {"InputFilter": "$[1:]"}})
    assert record.status == "Succeeded", [(s.name, s.failure_reason) for s in record.steps]
    answers = storage.read_bytes("s3://bkt/out/one.csv.out").decode().splitlines()
    assert len(answers) == 3
    assert all(json.loads(a)["predictions"][0]["classes"] in TABLE_CLASSES for a in answers)


def test_a_record_the_model_refuses_fails_the_job_naming_it(tmp_path, model_archive):
    # The id column is sent too: not a number, and 2 values where the model takes 4.
    storage, record = _run(tmp_path, model_archive, {"BatchStrategy": "SingleRecord",
                                                     "DataProcessing": {"InputFilter": "$[0:2]"}})
    assert record.status == "Failed"
    reason = record.step("Score").failure_reason
    assert reason.startswith("ClientError: s3://bkt/in/") and "record 1: the model answered 400" in reason
    assert "CSV row 1 holds a value that is not a number" in reason
