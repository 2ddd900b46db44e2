"""A Transform's model server runs the model image's Python and versions, as its training job
did (issue 47): an SDK v2 pipeline on AWS's SKLearn 1.2-1 image (scikit-learn 1.2.1, Python
3.9) trains and pickles a classifier, and the Transform's inference script, which imports only
joblib, loads it with the image's scikit-learn: no ``InconsistentVersionWarning`` (a model
pickled with one scikit-learn and loaded with another), and the script sees scikit-learn
1.2.1 under Python 3.9. Through ``trainpipe run --local --definition``.

Slow: the first run on a machine makes the image's environment (~/.cache/trainpipe/
image-environments/, shared with later runs and the other tests that name this image).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.jobs.environments.environment import find_python

REPO = Path(__file__).resolve().parents[4]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
BUCKET = "transform-versions"
TRAIN = """\
import os

import joblib
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

features, labels = load_iris(return_X_y=True)
model = LogisticRegression(max_iter=500).fit(features, labels)
joblib.dump(model, os.path.join(os.environ["SM_MODEL_DIR"], "model.joblib"))
"""
# Only joblib: the model's scikit-learn is the one the pickle names, imported by unpickling.
INFERENCE = """\
import json
import os
import sys
import warnings

import joblib
import numpy as np

CAUGHT = []


def model_fn(model_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = joblib.load(os.path.join(model_dir, "model.joblib"))
    CAUGHT.extend(type(w.message).__name__ + ": " + str(w.message) for w in caught)
    return model


def predict_fn(data, model):
    return model.predict(np.atleast_2d(data))


def output_fn(prediction, accept):
    sklearn = sys.modules["sklearn"]
    return json.dumps({"labels": [int(x) for x in prediction], "sklearn": sklearn.__version__,
                       "python": "%d.%d" % sys.version_info[:2], "warnings": CAUGHT}) + "\\n"
"""


def build(tmp_path: Path, session) -> Path:
    from sagemaker.sklearn import SKLearn, SKLearnModel
    from sagemaker.transformer import Transformer
    from sagemaker.workflow.model_step import ModelStep
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TrainingStep, TransformStep

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    (code / "inference.py").write_text(INFERENCE)
    estimator = SKLearn(entry_point="train.py", source_dir=str(code), framework_version="1.2-1", role=ROLE,
                        instance_type="ml.m5.large", instance_count=1, sagemaker_session=session)
    train = TrainingStep(name="Train", step_args=estimator.fit())
    model = SKLearnModel(model_data=train.properties.ModelArtifacts.S3ModelArtifacts, entry_point="inference.py",
                         source_dir=str(code), framework_version="1.2-1", role=ROLE, sagemaker_session=session)
    create = ModelStep(name="CreateModel", step_args=model.create(instance_type="ml.m5.large"))
    transformer = Transformer(model_name=create.properties.ModelName, instance_type="ml.m5.large", instance_count=1,
                              output_path=f"s3://{BUCKET}/scored", accept="application/json",
                              strategy="MultiRecord", sagemaker_session=session)
    score = TransformStep(name="Score", step_args=transformer.transform(
        data=f"s3://{BUCKET}/new-data/", content_type="text/csv", split_type="Line"))
    definition = tmp_path / "pipeline.json"
    definition.write_text(Pipeline(name="transform-versions", steps=[train, create, score],
                                   sagemaker_session=session).definition())
    return definition


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_a_transform_loads_the_model_with_the_images_scikit_learn(tmp_path):
    import sklearn

    from pipeline.local.store.session import LocalStoreSession

    assert sklearn.__version__ != "1.2.1"  # this machine's is another: the test tells them apart
    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket=BUCKET)
    session.storage.put_bytes(b"5.1,3.5,1.4,0.2\n6.7,3.0,5.2,2.3\n", f"s3://{BUCKET}/new-data/a.csv")
    definition = build(tmp_path, session)
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir)], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    answer = json.loads(session.storage.read_bytes(f"s3://{BUCKET}/scored/a.csv.out"))
    assert answer == {"labels": [0, 2], "sklearn": "1.2.1", "python": "3.9", "warnings": []}
    (server_log,) = workdir.glob("runs/*/jobs/*-Score-*/hosts/algo-1/server.log")
    assert "InconsistentVersionWarning" not in server_log.read_text()
    (job_log,) = workdir.glob("runs/*/jobs/*-Score-*/job.log")
    # joblib: the record names it as scikit-learn's dependency, unpinned; the log line says what it gets.
    assert ("(Python 3.9: the image's Python, with its aws-sklearn-1.2-1 packages the code imports; the record "
            "pins no version of joblib: pip's newest for Python 3.9)") in job_log.read_text()


def test_the_server_imports_the_images_framework_and_numpy_besides_the_script(tmp_path):
    """What ``choose`` judges for a framework model's server: the script's imports (joblib), the
    image's framework and numpy (the server unpickles and decodes with them), and the server's own
    distributions to install beside the image's pins."""
    from pipeline.local.jobs.transform import FRAMEWORK, SERVER_DISTRIBUTIONS, TFS, serving_facts

    (tmp_path / "inference.py").write_text(INFERENCE)
    code, note = serving_facts("683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3",
                               FRAMEWORK, tmp_path)
    assert {"joblib", "sklearn", "numpy"} <= code.imports and code.runtime == SERVER_DISTRIBUTIONS and note == ""
    assert serving_facts("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.13-cpu", TFS,
                         tmp_path) == (None, "")


def test_an_image_whose_python_cannot_run_the_server_keeps_the_runners_and_says_so(tmp_path):
    """XGBoost 0.90-2's Python is 3.6, where serving.handler does not parse: the runner's Python
    serves it, and the job's log says why."""
    from pipeline.local.jobs.transform import FRAMEWORK, serving_facts

    (tmp_path / "inference.py").write_text("import xgboost\n")
    code, note = serving_facts("683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:0.90-2-cpu-py3",
                               FRAMEWORK, tmp_path)
    assert code is None
    assert note.startswith("the image's Python 3.6 cannot run trainpipe's model server (it needs 3.7 or later)")
