"""SDK v3 ``@step`` functions run locally (pipeline/local/jobs/function_step.py, in the v3 SDK's
environment: pipeline/local/jobs/environments/sdk_v3_environment.py), through the CLI.

The pipeline is built by the real SDK v3 (sagemaker 3.27.0, ``sagemaker.mlops.workflow``), run
by the v3 environment's own Python as a user's ``python build.py``: preprocess -> train ->
evaluate -> a ConditionStep on evaluate's returned value -> register (another @step) or fail.
The SDK uploads its signed payloads and the bootstrap to moto's S3 server (this project's
``S3Server``), whose objects the test copies into the run's local store, as a user's
``aws s3 sync`` would. The end-to-end test is slow: on a machine without the v3 environment
the first run makes it (~100 s); then ~60 s for two CLI runs (four jobs, then one that fails).
The others start no job (a few seconds each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from pipeline.local.jobs.environments import sdk_v3_environment
from tests import readme_record

REPO = Path(__file__).resolve().parents[3]
SDK = "3.27.0"  # the version sdk-v3-constraints.txt pins
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
ROLE = "arn:aws:iam::111122223333:role/SageMaker"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"

BUILD = '''
import sys
from pathlib import Path

import boto3
from sagemaker.core.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.core.workflow.pipeline_context import PipelineSession
from sagemaker.mlops.workflow.condition_step import ConditionStep
from sagemaker.mlops.workflow.fail_step import FailStep
from sagemaker.mlops.workflow.function_step import step
from sagemaker.mlops.workflow.pipeline import Pipeline

ROLE = "arn:aws:iam::111122223333:role/SageMaker"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="fs-bucket")
# v3's PipelineSession asks STS for the account unless given the bucket (docs/sdk-v3.md).
session = PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket="fs-bucket")


@step(name="Preprocess", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE)
def preprocess(rows):
    return {"train": [r * 2 for r in rows], "count": len(rows)}


@step(name="Train", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE)
def train(data, bias):
    return {"weights": sum(data["train"]) / data["count"] + bias}


@step(name="Evaluate", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE)
def evaluate(model):
    return model["weights"] / 10


@step(name="Register", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE)
def register(model, score):
    import os
    return {"registered": model["weights"], "score": score, "job": os.environ["TRAINING_JOB_NAME"]}


model = train(preprocess([1, 2, 3]), 0.5)
score = evaluate(model)
check = ConditionStep(name="GoodEnough", conditions=[ConditionGreaterThanOrEqualTo(left=score, right=0.4)],
                      if_steps=[register(model, score)],
                      else_steps=[FailStep(name="TooLow", error_message="score below 0.4")])
Path(sys.argv[1]).write_text(Pipeline(name="fsteps", steps=[check], sagemaker_session=session).definition())
'''


def run(definition: Path, workdir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir), "--tracking-uri", "off", "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})


def build_v3(tmp_path: Path) -> Path:
    """The definition built by SDK v3 in its environment, its uploads copied into the run's store."""
    from pipeline.local.jobs.function_step import S3Server, s3_variables

    python = sdk_v3_environment.interpreter(SDK, PYTHON).seed / "bin" / "python"
    project, definition = tmp_path / "project", tmp_path / "fsteps.json"
    project.mkdir()
    (project / "build.py").write_text(BUILD)
    server = S3Server(tmp_path / "s3-server.log")
    try:
        env = {**os.environ, **s3_variables(server.url, "us-east-1"), "SAGEMAKER_VALIDATE_ROLE": "false"}
        done = subprocess.run([str(python), "build.py", str(definition)], cwd=project, capture_output=True,
                              text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        client = server.client("us-east-1")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="fs-bucket"):
            for item in page.get("Contents", []):
                path = tmp_path / "work" / "store" / "fs-bucket" / item["Key"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(client.get_object(Bucket="fs-bucket", Key=item["Key"])["Body"].read())
    finally:
        server.close()
    return definition


def steps_of(workdir: Path) -> tuple[str, dict]:
    record = max((workdir / "runs").glob("*/execution.json"), key=lambda p: p.stat().st_mtime)
    execution = json.loads(record.read_text())
    return execution["execution_id"], {s["name"]: s for s in execution["steps"]}


@pytest.mark.slow
def test_an_sdk_v3_at_step_pipeline_runs_in_the_v3_sdks_python_and_a_tampered_payload_fails(tmp_path):
    definition = build_v3(tmp_path)
    work = tmp_path / "work"
    done = run(definition, work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    execution, steps = steps_of(work)
    # (2+4+6)/3 + 0.5 = 4.5; evaluate returns 0.45 >= 0.4: the condition read the returned value
    # (results.json under Evaluate's S3OutputPath) and took the if branch.
    assert {n: s["status"] for n, s in steps.items()} == {
        "Preprocess": "Succeeded", "Train": "Succeeded", "Evaluate": "Succeeded", "GoodEnough": "Succeeded",
        "Register": "Succeeded", "TooLow": "NotExecuted"}, steps
    # v3 writes results under the step's own folder: <base>/<step>/<build time>/<execution>/results.
    (results,) = (work / "store" / "fs-bucket" / "fsteps" / "Register").glob(f"*/{execution}/results")
    returned = cloudpickle.loads((results / "payload.pkl").read_bytes())
    assert returned["registered"] == 4.5 and returned["score"] == pytest.approx(0.45)
    assert returned["job"].startswith("fsteps-Register-")
    # The job ran v3's invoke_function in the v3 SDK's environment (the bootstrap warns when the
    # job's SDK is not the client's: it did not).
    log = next((work / "runs").glob(f"*{execution[-8:]}/jobs/fsteps-Register-*/job.log")).read_text()
    assert "sagemaker.core.remote_function.invoke_function" in log
    assert "Inconsistent sagemaker versions" not in log

    # Someone with write access to the bucket swaps Preprocess's pickled arguments: the job
    # verifies the client's signature with the public key its Environment carries, as SageMaker
    # passes it (REMOTE_FUNCTION_SECRET_KEY), and the step fails with the SDK's own error.
    (arguments,) = (work / "store" / "fs-bucket" / "fsteps" / "Preprocess").glob("*/arguments/payload.pkl")
    arguments.write_bytes(cloudpickle.dumps(([100, 200, 300],), protocol=4))
    done = run(definition, work)
    assert done.returncode != 0
    _, steps = steps_of(work)
    assert steps["Preprocess"]["status"] == "Failed"
    readme_record.record(steps["Preprocess"]["failure_reason"])
    assert steps["Preprocess"]["failure_reason"] == (
        "AlgorithmError: DeserializationError('Integrity check for the serialized function or data failed. "
        "Please restrict access to your S3 bucket')"), steps["Preprocess"]["failure_reason"]
    assert steps.get("Train", {}).get("status") in (None, "NotExecuted")


def definition_of(sdk: str) -> dict:
    """One @step Training step in v3's format (as sagemaker 3.27.0 writes it), at client SDK ``sdk``."""
    arguments = ["--s3_base_uri", "s3://fs-bucket/fsteps", "--region", "us-east-1", "--client_python_version",
                 PYTHON, "--client_sagemaker_pysdk_version", sdk, "--dependency_settings", '{"dependency_file": null}',
                 "--pipeline_step_name", "Look", "--pipeline_execution_id", {"Get": "Execution.PipelineExecutionId"},
                 "--func_step_s3_dir", "2026-11-28-15-53-55-393", "--property_references",
                 "Execution.PipelineExecutionId", {"Get": "Execution.PipelineExecutionId"}]
    request = {
        "RoleArn": ROLE, "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "InputDataConfig": [{"ChannelName": "sagemaker_remote_function_bootstrap", "DataSource": {"S3DataSource": {
            "S3Uri": "s3://fs-bucket/fsteps/sagemaker_remote_function_bootstrap", "S3DataType": "S3Prefix"}}}],
        "OutputDataConfig": {"S3OutputPath": {"Std:Join": {"On": "/", "Values": [
            "s3://fs-bucket/fsteps", "Look", "2026-11-28-15-53-55-393", {"Get": "Execution.PipelineExecutionId"},
            "results"]}}},
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File", "ContainerEntrypoint": [
            "/bin/bash", "/opt/ml/input/data/sagemaker_remote_function_bootstrap/job_driver.sh"],
            "ContainerArguments": arguments},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1, "InstanceType": "ml.m5.xlarge"},
        "Environment": {"AWS_DEFAULT_REGION": "us-east-1", "REMOTE_FUNCTION_SECRET_KEY": "-----BEGIN PUBLIC KEY-----"}}
    return {"Version": "2020-12-01", "Metadata": {}, "Parameters": [], "MlflowConfig": None,
            "Steps": [{"Name": "Look", "Type": "Training", "Arguments": request}]}


def test_an_sdk_v3_at_step_whose_sdk_cannot_be_installed_here_is_refused_before_any_step(tmp_path):
    """No registry answers (PIP_NO_INDEX) and no environment of that SDK exists yet: one line,
    naming the fix, before any step (no run folder has a job)."""
    definition = tmp_path / "fsteps.json"
    definition.write_text(json.dumps(definition_of("3.999.0")))
    driver = tmp_path / "work" / "store" / "fs-bucket" / "fsteps" / "sagemaker_remote_function_bootstrap" / "job_driver.sh"
    driver.parent.mkdir(parents=True)
    driver.write_text("exit 1\n")
    done = run(definition, tmp_path / "work", {"PIP_NO_INDEX": "1", "TRAINPIPE_IMAGE_ENVIRONMENTS": str(tmp_path / "envs")})
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    readme_record.record(line)
    assert line.startswith("trainpipe run: error: the local runner cannot run step Look (Type Training: an SDK v3 "
                           f"@step function: its job needs SageMaker SDK 3.999.0 on Python {PYTHON}, whose "
                           "environment pip could not make here (ERROR: "), line
    assert line.endswith(f"); make the package registry reachable for one run, with sagemaker 3.999.0 on it "
                         f"(the environment is kept in {tmp_path / 'envs'}))"), line
    assert not list((tmp_path / "work").glob("runs/*/jobs/*"))


def test_the_v3_environment_pins_the_clients_sdk_and_gives_way_to_another_3x():
    pinned = sdk_v3_environment.constraints(SDK)
    assert f"sagemaker=={SDK}\n" in pinned and "sagemaker-core==" in pinned and "boto3==" in pinned
    other = sdk_v3_environment.constraints("3.28.0")
    assert not [line for line in other.splitlines() if line.startswith("sagemaker")], other
    assert "boto3==" in other  # the third-party pins stay
    assert sdk_v3_environment.client_sdk(["--client_sagemaker_pysdk_version", "3.27.0"]) == "3.27.0"
    assert sdk_v3_environment.client_sdk(["--client_sagemaker_pysdk_version", "2.257.7"]) is None
    assert sdk_v3_environment.client_sdk(["--s3_base_uri", "s3://b/p"]) is None


def test_a_client_python_this_machine_lacks_is_named_with_the_fix(monkeypatch):
    monkeypatch.setattr(sdk_v3_environment, "find_python", lambda version: None)
    with pytest.raises(sdk_v3_environment.Unbuildable) as raised:
        sdk_v3_environment.interpreter(SDK, "3.99")
    assert str(raised.value) == (f"its job needs SageMaker SDK {SDK} on Python 3.99, and this machine has no "
                                 f"Python 3.99 (install it, or build the pipeline with Python {PYTHON})")
