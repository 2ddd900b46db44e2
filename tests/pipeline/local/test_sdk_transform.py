"""A pipeline built with the plain SageMaker SDK, ModelStep (a TensorFlowModel) then
TransformStep, run unchanged by ``trainpipe run --local --definition``: the model served by
the code behind ``trainpipe serve`` on two instances, the outputs ``<key>.out``.

Slow: a whole pipeline through the CLI, with a model server per instance."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.serving.conftest import TABLE_CLASSES, save_table_model

REPO = Path(__file__).resolve().parents[3]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
BUCKET = "sdk-transform"
pytestmark = pytest.mark.slow


def _pipeline(session):
    from sagemaker.tensorflow import TensorFlowModel
    from sagemaker.transformer import Transformer
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionEquals
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.model_step import ModelStep
    from sagemaker.workflow.parameters import ParameterInteger
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TransformStep

    instances = ParameterInteger(name="TransformInstances", default_value=2)
    model = TensorFlowModel(model_data=f"s3://{BUCKET}/model/model.tar.gz", framework_version="2.14", role=ROLE,
                            sagemaker_session=session)
    create = ModelStep(name="CreateModel", step_args=model.create(instance_type="ml.m5.large"))
    transformer = Transformer(model_name=create.properties.ModelName, instance_type="ml.m5.large",
                              instance_count=instances, output_path=f"s3://{BUCKET}/scored",
                              accept="application/json", assemble_with="Line", strategy="MultiRecord",
                              max_payload=1, sagemaker_session=session)
    score = TransformStep(name="Score", step_args=transformer.transform(
        data=f"s3://{BUCKET}/new-data/", content_type="text/csv", split_type="Line",
        input_filter="$[1:]", join_source="Input", output_filter="$[0,-1]"))
    # A later step reads the Transform step's properties, as SageMaker lets it.
    check = ConditionStep(name="CheckScored", conditions=[
        ConditionEquals(left=score.properties.TransformJobStatus, right="Completed"),
        ConditionEquals(left=score.properties.TransformOutput.S3OutputPath, right=f"s3://{BUCKET}/scored"),
    ], else_steps=[FailStep(name="NotScored", error_message="the Transform step's properties did not resolve")])
    return Pipeline(name="sdk-transform", parameters=[instances], steps=[create, score, check],
                    sagemaker_session=session)


def test_model_and_transform_steps_from_the_sdk(tmp_path):
    from pipeline.local.store.session import LocalStoreSession

    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket=BUCKET)
    saved = Path(save_table_model(str(tmp_path / "saved")))
    with tarfile.open(tmp_path / "model.tar.gz", "w:gz") as tar:
        tar.add(saved / "1", "1")
    session.storage.put_file(tmp_path / "model.tar.gz", f"s3://{BUCKET}/model/model.tar.gz")
    for name, rows in {"a.csv": 3, "b.csv": 2, "c.csv": 1}.items():
        body = "".join(f"{name}-{i},5.{i},3.5,1.4,0.2\n" for i in range(rows))
        session.storage.put_bytes(body.encode(), f"s3://{BUCKET}/new-data/{name}")
    definition = tmp_path / "transform.json"
    definition.write_text(_pipeline(session).definition())

    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outputs = session.storage.list(f"s3://{BUCKET}/scored/")
    assert outputs == [f"s3://{BUCKET}/scored/{n}.out" for n in ("a.csv", "b.csv", "c.csv")]
    lines = [json.loads(line) for uri in outputs for line in session.storage.read_bytes(uri).splitlines()]
    assert [line[0] for line in lines] == ["a.csv-0", "a.csv-1", "a.csv-2", "b.csv-0", "b.csv-1", "c.csv-0"]
    assert all(line[1]["classes"] in TABLE_CLASSES for line in lines)
    (execution,) = (workdir / "runs").glob("*/execution.json")
    steps = {s["name"]: s for s in json.loads(execution.read_text())["steps"]}
    assert steps["Score"]["properties"]["TransformOutput"]["S3OutputPath"] == f"s3://{BUCKET}/scored"
    assert steps["Score"]["properties"]["TransformResources"]["InstanceCount"] == 2
    assert steps["CheckScored"]["properties"] == {"Outcome": True}
    assert "on 2 instance(s): [2, 1]" in done.stdout
