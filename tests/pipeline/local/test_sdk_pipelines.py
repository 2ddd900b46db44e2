"""Pipelines written with the plain SageMaker SDK, the way AWS's examples write them, run
unchanged by ``trainpipe run --local --definition``: their scripts open /opt/ml/... directly
and check ``socket.gethostname()`` against resourceconfig.json. One runs on the local store,
the other against a moto S3 server over HTTP with no AWS credentials configured.

Slow: each runs a whole pipeline (the TensorFlow one about a minute on 2 shared cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from pipeline.local.hosts import namespaces
from tests.moto_aws import moto_url  # noqa: F401  (a session fixture: one moto server)

REPO = Path(__file__).resolve().parents[3]
pytestmark = [
    pytest.mark.slow,
    # AWS's abalone example uses the RegisterModel step collection; the SDK now prefers ModelStep.
    pytest.mark.filterwarnings("ignore:We are deprecating the use of RegisterModel:DeprecationWarning"),
    pytest.mark.skipif(namespaces.unavailable_reason() is not None,
                       reason=f"scripts that open /opt/ml need namespaces: {namespaces.unavailable_reason()}"),
]


def digits_csv(path: Path) -> Path:
    import pandas as pd
    from sklearn.datasets import load_digits

    digits = load_digits()
    frame = pd.DataFrame(digits.data.astype(int), columns=[f"f{i}" for i in range(digits.data.shape[1])])
    frame["label"] = digits.target
    frame.to_csv(path, index=False)
    return path


def trainpipe(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def no_aws_environment(tmp_path: Path) -> dict:
    """This process's environment without any AWS credentials or configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(REPO)})
    return env


def steps_of(workdir: Path) -> dict:
    (execution,) = (workdir / "runs").glob("*/execution.json")
    return {s["name"]: s for s in json.loads(execution.read_text())["steps"]}


def registered(workdir: Path, env=None) -> list[dict]:
    listed = trainpipe("models", "--workdir", str(workdir), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def test_tensorflow_pipeline_on_the_local_store(tmp_path):
    from sagemaker.s3 import S3Uploader

    from pipeline.local.store.session import LocalStoreSession

    from .sdk_pipelines.pipelines import tensorflow_pipeline

    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket="sdk-bucket")
    # As in AWS's notebooks: upload the data set, then build the pipeline (which uploads code).
    S3Uploader.upload(str(digits_csv(tmp_path / "raw_data_all.csv")), "s3://sdk-bucket/digits",
                      sagemaker_session=session)
    definition = tmp_path / "tensorflow.json"
    definition.write_text(tensorflow_pipeline(session, "sdk-bucket").definition())

    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = steps_of(workdir)
    assert steps["CheckAccuracy"]["status"] == "Succeeded"
    assert steps["CheckAccuracy"]["detail"].endswith("is true -> if branch")
    assert steps["AccuracyTooLow"]["status"] == "NotExecuted"
    (package,) = registered(workdir)
    assert package["ModelPackageGroupName"] == "sdk-tensorflow-digits"
    assert package["ModelApprovalStatus"] == "Approved"
    assert package["ModelDataUrl"].startswith("s3://sdk-bucket/models/") and package["ModelDataUrl"].endswith("model.tar.gz")
    assert package["Metrics"]["metrics"]["accuracy"]["value"] >= 0.7
    # Both training hosts checked gethostname() against their own resourceconfig.json.
    log = next((workdir / "runs").glob("*/jobs/*TrainModel*/job.log")).read_text()
    assert "[algo-1] training on algo-1 of ['algo-1', 'algo-2']" in log
    assert "[algo-2] training on algo-2 of ['algo-1', 'algo-2']" in log


def test_sklearn_pipeline_against_an_s3_server_with_no_credentials(tmp_path, moto_url):  # noqa: F811
    from pipeline.local.store.session import LocalStoreSession

    from .sdk_pipelines.pipelines import sklearn_pipeline

    boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x",
                 aws_secret_access_key="x").create_bucket(Bucket="sdk-moto-bucket")
    env = no_aws_environment(tmp_path)
    workdir = tmp_path / "work"
    session = LocalStoreSession(bucket="sdk-moto-bucket", s3_endpoint=moto_url)
    definition = tmp_path / "sklearn.json"
    definition.write_text(sklearn_pipeline(session, "sdk-moto-bucket").definition())

    # The data set is a local file given to the s3:// parameter; -p with a higher threshold
    # than this model reaches takes the else branch on a second run.
    data = digits_csv(tmp_path / "raw_data_all.csv")
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                     "--s3-endpoint", moto_url, "-p", f"InputData={data}", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "using dummy ones" in done.stderr
    assert "parameter InputData: " in done.stdout and "copied to s3://sdk-moto-bucket/trainpipe-local-inputs/" in done.stdout
    steps = steps_of(workdir)
    assert steps["CheckAccuracy"]["detail"].endswith("is true -> if branch")
    assert steps["AccuracyTooLow"]["status"] == "NotExecuted"
    (package,) = registered(workdir, env)
    assert package["ModelPackageGroupName"] == "sdk-sklearn-digits"
    assert package["Metrics"]["metrics"]["accuracy"]["value"] >= 0.8
    model = package["ModelDataUrl"]
    bucket, key = model[len("s3://"):].split("/", 1)
    head = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x").head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] > 0  # the model went to the S3 server, not to a local directory
    assert not (workdir / "store").exists()

    # The same definition, a threshold this model cannot reach: the else branch, the FailStep.
    failed = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(tmp_path / "again"),
                       "--s3-endpoint", moto_url, "-p", f"InputData={data}", "-p", "AccuracyThreshold=0.999",
                       env=env)
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert failed.stderr.strip().splitlines()[-1].endswith("Failed: accuracy below 0.999")
    steps = steps_of(tmp_path / "again")
    assert steps["CheckAccuracy"]["detail"].endswith("is false -> else branch")
    assert steps["RegisterDigitsModel-RegisterModel"]["status"] == "NotExecuted"
    assert steps["AccuracyTooLow"]["status"] == "Failed"
