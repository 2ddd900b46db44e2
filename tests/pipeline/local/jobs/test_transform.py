"""pipeline/local/jobs/transform.py: a Transform job's model servers get what a Training job's
processes get (the allowlisted environment, a private HOME, a job environment of their own,
private folders), and any record it cannot handle ends the job Failed with one line.

Each test runs a real job: a framework model (an inference script, no TensorFlow) served by
``python -m serving.handler`` on 127.0.0.1, a second or two each.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile

from pipeline.local.jobs.transform import TransformJob
from tests import readme_record

BUCKET = "transform-bucket"
# Answers each request with what its process sees: environment names, HOME, its Python.
REPORTING_SCRIPT = '''
import json, os, sys

def model_fn(model_dir):
    return model_dir

def transform_fn(model, data, content_type, accept):
    return json.dumps({"names": sorted(os.environ), "home": os.environ.get("HOME"),
                       "prefix": sys.prefix, "executable": sys.executable,
                       "request": os.environ.get("REQUEST_SETTING"), "model_dir": model}), "application/json"
'''


def model_archive(script: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("code/inference.py")
        info.size = len(script.encode())
        tar.addfile(info, io.BytesIO(script.encode()))
    return out.getvalue()


def transform(storage, tmp_path, records: bytes, script: str = REPORTING_SCRIPT, environment: dict | None = None,
              **changes):
    storage.put_bytes(model_archive(script), f"s3://{BUCKET}/model/model.tar.gz")
    storage.put_bytes(records, f"s3://{BUCKET}/input/records.csv")
    request = {
        "TransformInput": {"DataSource": {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/input/"}},
                           "ContentType": "text/csv", "SplitType": "Line"},
        "TransformOutput": {"S3OutputPath": f"s3://{BUCKET}/output", "Accept": "application/json"},
        "TransformResources": {"InstanceCount": 1, "InstanceType": "ml.m5.large"},
        "BatchStrategy": "SingleRecord",
        **changes,
    }
    model = {"Image": "sklearn-inference:1.2-1-cpu-py3", "ModelDataUrl": f"s3://{BUCKET}/model/model.tar.gz",
             "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "REQUEST_SETTING": "given", **(environment or {})},
             "kind": "framework"}
    job = TransformJob(request, "job", storage, tmp_path / "job", model=model, region="us-east-1",
                       account="123456789012", environments=tmp_path / "job-environments")
    return job.run()


def test_the_model_server_gets_the_allowlist_a_private_home_and_its_own_python(local_storage, tmp_path,
                                                                                  monkeypatch):
    for name in ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "APIKEY", "DB_PWD", "SSH_KEYS", "HF_PAT"):
        monkeypatch.setenv(name, "runner-secret")
    monkeypatch.setenv("HOME", str(tmp_path / "runner-home"))
    result = transform(local_storage, tmp_path, b"1,2\n")
    assert result.status == "Completed", result.failure_reason
    seen = json.loads(local_storage.read_bytes(f"s3://{BUCKET}/output/records.csv.out"))
    for name in ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "APIKEY", "DB_PWD", "SSH_KEYS", "HF_PAT"):
        assert name not in seen["names"]
    assert seen["request"] == "given"  # the model's Environment, as SageMaker sets it
    job = tmp_path / "job"
    assert seen["home"] == str(job / "home" / "algo-1")
    # Its own job environment: a pip install lands there, never in trainpipe's venv.
    assert seen["prefix"].startswith(str(tmp_path / "job-environments")) and seen["prefix"] != sys.prefix
    for folder in (job, job / "home" / "algo-1", job / "model"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_a_record_the_filters_cannot_read_fails_the_job_with_one_line(local_storage, tmp_path):
    """A CSV value over csv's 128 KB field limit, read by InputFilter in the runner."""
    result = transform(local_storage, tmp_path, b"1," + b"9" * (200 * 1024) + b"\n",
                       DataProcessing={"InputFilter": "$[1:]"})
    readme_record.record(result.failure_reason)
    assert result.status == "Failed"
    assert result.failure_reason == ("ClientError: a CSV record the filters cannot read: field larger than "
                                     "field limit (131072) (one value over 131072 characters)")
    assert "Traceback" not in (tmp_path / "job" / "job.log").read_text()


def test_an_unexpected_error_is_the_jobs_internal_error_not_the_runners_traceback(local_storage, tmp_path,
                                                                                   monkeypatch):
    from pipeline.local.jobs import transform_records

    def broken(*args):
        raise KeyError("surprise")

    monkeypatch.setattr(transform_records, "split", broken)
    result = transform(local_storage, tmp_path, b"1,2\n")
    assert result.status == "Failed"
    assert result.failure_reason == "InternalServerError: KeyError: 'surprise'"
    assert "Traceback" in (tmp_path / "job" / "job.log").read_text()  # for whoever debugs the runner


# Takes its request and never answers it; the server's own limit (SAGEMAKER_MODEL_SERVER_TIMEOUT,
# set far off below) would otherwise answer 504 first.
HANGING_SCRIPT = '''
import time

def model_fn(model_dir):
    return model_dir

def transform_fn(model, data, content_type, accept):
    time.sleep(3600)
'''


def test_a_hung_model_server_fails_the_job_by_its_deadline_naming_the_object_and_the_setting(local_storage,
                                                                                             tmp_path):
    result = transform(local_storage, tmp_path, b"1,2\n", HANGING_SCRIPT,
                       environment={"SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600"},
                       ModelClientConfig={"InvocationsTimeoutInSeconds": 1, "InvocationsMaxRetries": 1})
    readme_record.record(result.failure_reason)
    assert result.status == "Failed"
    assert result.failure_reason.startswith(
        "AlgorithmError: s3://transform-bucket/input/records.csv record 1: the model server of algo-1 gave no "
        "complete answer within 1 s, 2 time(s) (ModelClientConfig InvocationsTimeoutInSeconds 1, "
        "InvocationsMaxRetries 1); if the model needs longer, raise InvocationsTimeoutInSeconds (at most 3600) "
        "in the transform's model_client_config"), result.failure_reason
    assert not local_storage.exists(f"s3://{BUCKET}/output/records.csv.out")


# Fails its first request with a 500 and answers the next: a counter in the model's folder.
FLAKY_SCRIPT = '''
import os

def model_fn(model_dir):
    return model_dir

def transform_fn(model, data, content_type, accept):
    seen = os.path.join(model, "seen")
    if not os.path.exists(seen):
        open(seen, "w").close()
        raise RuntimeError("first call fails")
    return "7", "text/csv"
'''


def test_a_failed_request_is_tried_again_up_to_invocations_max_retries(local_storage, tmp_path):
    result = transform(local_storage, tmp_path, b"1,2\n", FLAKY_SCRIPT,
                       ModelClientConfig={"InvocationsMaxRetries": 1})
    assert result.status == "Completed", result.failure_reason
    assert local_storage.read_bytes(f"s3://{BUCKET}/output/records.csv.out").strip() == b"7"

    refused = transform(local_storage, tmp_path / "again", b"1,2\n", FLAKY_SCRIPT,
                        ModelClientConfig={"InvocationsMaxRetries": 0})
    assert refused.status == "Failed"
    assert refused.failure_reason.startswith("AlgorithmError: s3://transform-bucket/input/records.csv record 1: "
                                             "the model answered 500"), refused.failure_reason


def test_a_model_client_config_sagemaker_would_refuse_is_one_line_before_any_server_starts(local_storage, tmp_path):
    result = transform(local_storage, tmp_path, b"1,2\n", ModelClientConfig={"InvocationsTimeoutInSeconds": 0})
    readme_record.record(result.failure_reason)
    assert result.status == "Failed"
    assert result.failure_reason == ("ClientError: ModelClientConfig InvocationsTimeoutInSeconds 0 is not a whole "
                                     "number from 1 to 3600, as SageMaker requires")
    assert not (tmp_path / "job" / "hosts").exists()
