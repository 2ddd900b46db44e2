"""Pipelines built with the plain SageMaker SDK, ModelStep (a framework model with an
``entry_point`` inference script) then TransformStep, run unchanged by
``trainpipe run --local --definition``, the script's model served by ``serving.handler``:

- an SKLearnModel: the script goes up as sourcedir.tar.gz (SAGEMAKER_SUBMIT_DIRECTORY s3://),
  fetched from the store; two instances, the outputs ``<key>.out`` joined with their inputs;
- a PyTorchModel whose model data is a parameter: the SDK adds a repack Training step that puts
  the script into model.tar.gz's code/ (SAGEMAKER_SUBMIT_DIRECTORY /opt/ml/model/code).

Slow: a whole pipeline through the CLI, with a model server per instance."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
BUCKET = "sdk-framework-transform"
CLASSES = ["setosa", "versicolor", "virginica"]
pytestmark = pytest.mark.slow

# model_fn and predict_fn; the SKLearn container's default input_fn and output_fn.
SCRIPT = '''
import os

import joblib
import numpy as np


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def predict_fn(data, model):
    return model.predict(np.atleast_2d(data))  # one CSV row decodes 1-D
'''


def _pipeline(session, source_dir: Path):
    from sagemaker.sklearn import SKLearnModel
    from sagemaker.transformer import Transformer
    from sagemaker.workflow.model_step import ModelStep
    from sagemaker.workflow.parameters import ParameterInteger
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TransformStep

    instances = ParameterInteger(name="TransformInstances", default_value=2)
    model = SKLearnModel(model_data=f"s3://{BUCKET}/model/model.tar.gz", entry_point="inference.py",
                         source_dir=str(source_dir), framework_version="1.2-1", role=ROLE,
                         sagemaker_session=session)
    create = ModelStep(name="CreateModel", step_args=model.create(instance_type="ml.m5.large"))
    transformer = Transformer(model_name=create.properties.ModelName, instance_type="ml.m5.large",
                              instance_count=instances, output_path=f"s3://{BUCKET}/scored",
                              accept="text/csv", assemble_with="Line", strategy="MultiRecord",
                              max_payload=1, sagemaker_session=session)
    score = TransformStep(name="Score", step_args=transformer.transform(
        data=f"s3://{BUCKET}/new-data/", content_type="text/csv", split_type="Line",
        input_filter="$[1:]", join_source="Input", output_filter="$[0,-1]"))
    return Pipeline(name="sdk-framework-transform", parameters=[instances], steps=[create, score],
                    sagemaker_session=session)


def _store_model_and_script(session, tmp_path: Path):
    """(the classifier, the script's folder): the model.tar.gz in the store, as training saves it."""
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    features, labels = load_iris(return_X_y=True)
    classifier = LogisticRegression(max_iter=500).fit(features, np.array(CLASSES)[labels])
    joblib.dump(classifier, tmp_path / "model.joblib")
    with tarfile.open(tmp_path / "model.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "model.joblib", "model.joblib")
    session.storage.put_file(tmp_path / "model.tar.gz", f"s3://{BUCKET}/model/model.tar.gz")
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    (source_dir / "inference.py").write_text(SCRIPT)
    (source_dir / "requirements.txt").write_text("scikit-learn\njoblib\n")  # satisfied here: nothing said
    return classifier, source_dir


def _run(definition: Path, workdir: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_an_sklearn_model_with_an_entry_point_through_model_and_transform_steps(tmp_path):
    from pipeline.local.store.session import LocalStoreSession

    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket=BUCKET)
    classifier, source_dir = _store_model_and_script(session, tmp_path)
    rows = {"a.csv": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]],
            "b.csv": [[4.9, 3.0, 1.4, 0.2], [6.3, 3.3, 6.0, 2.5]], "c.csv": [[5.7, 2.8, 4.1, 1.3]]}
    for name, values in rows.items():
        body = "".join(f"{name}-{i}," + ",".join(map(str, row)) + "\n" for i, row in enumerate(values))
        session.storage.put_bytes(body.encode(), f"s3://{BUCKET}/new-data/{name}")
    definition = tmp_path / "transform.json"
    definition.write_text(_pipeline(session, source_dir).definition())
    container = json.loads(definition.read_text())["Steps"][0]["Arguments"]["PrimaryContainer"]
    assert container["Environment"]["SAGEMAKER_SUBMIT_DIRECTORY"].endswith("/sourcedir.tar.gz")

    done = _run(definition, workdir)
    outputs = session.storage.list(f"s3://{BUCKET}/scored/")
    assert outputs == [f"s3://{BUCKET}/scored/{n}.out" for n in ("a.csv", "b.csv", "c.csv")]
    lines = [line.split(",") for uri in outputs for line in session.storage.read_bytes(uri).decode().splitlines()]
    wanted = [[f"{name}-{i}", label] for name, values in rows.items()
              for i, label in enumerate(classifier.predict(values))]
    assert lines == wanted
    (execution,) = (workdir / "runs").glob("*/execution.json")
    steps = {s["name"]: s for s in json.loads(execution.read_text())["steps"]}
    assert steps["Score"]["properties"]["TransformResources"]["InstanceCount"] == 2
    assert "on 2 instance(s): [2, 1]" in done.stdout
    (log,) = (workdir / "runs").glob("*/jobs/*/hosts/algo-1/server.log")
    assert "serving inference.py" in log.read_text() and "lacks" not in log.read_text()
    # The server runs the image's scikit-learn (1.2.1), as the SKLearn 1.2-1 container does; this test
    # pickled the model with this machine's, so it warns there as here (tests/pipeline/local/jobs/
    # test_transform_image_versions.py trains it on the image instead).
    assert "when using version 1.2.1" in log.read_text()


def test_a_repacked_pytorch_model_serves_its_script_from_the_model_code_folder(tmp_path):
    from sagemaker.pytorch import PyTorchModel
    from sagemaker.transformer import Transformer
    from sagemaker.workflow.model_step import ModelStep
    from sagemaker.workflow.parameters import ParameterString
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TransformStep

    from pipeline.local.store.session import LocalStoreSession

    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket=BUCKET)
    classifier, source_dir = _store_model_and_script(session, tmp_path)
    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
    session.storage.put_bytes("".join(",".join(map(str, r)) + "\n" for r in rows).encode(),
                              f"s3://{BUCKET}/new-data/a.csv")
    model_data = ParameterString(name="ModelData", default_value=f"s3://{BUCKET}/model/model.tar.gz")
    model = PyTorchModel(model_data=model_data, entry_point="inference.py", source_dir=str(source_dir),
                         framework_version="2.1", py_version="py310", role=ROLE, sagemaker_session=session)
    create = ModelStep(name="CreateModel", step_args=model.create(instance_type="ml.m5.large"))
    transformer = Transformer(model_name=create.properties.ModelName, instance_type="ml.m5.large", instance_count=1,
                              output_path=f"s3://{BUCKET}/scored", accept="text/csv", strategy="MultiRecord",
                              sagemaker_session=session)
    score = TransformStep(name="Score", step_args=transformer.transform(
        data=f"s3://{BUCKET}/new-data/", content_type="text/csv", split_type="Line"))
    definition = tmp_path / "repacked.json"
    definition.write_text(Pipeline(name="sdk-repacked-transform", parameters=[model_data], steps=[create, score],
                                   sagemaker_session=session).definition())
    steps = json.loads(definition.read_text())["Steps"]
    assert [s["Type"] for s in steps] == ["Training", "Model", "Transform"]  # the SDK's repack step first
    assert steps[1]["Arguments"]["PrimaryContainer"]["Environment"]["SAGEMAKER_SUBMIT_DIRECTORY"] == "/opt/ml/model/code"

    done = _run(definition, workdir)
    assert session.storage.read_bytes(f"s3://{BUCKET}/scored/a.csv.out").decode().split() == list(classifier.predict(rows))
    assert "script inference.py from /opt/ml/model/code" in done.stdout
