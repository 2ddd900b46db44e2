"""pipeline/local/dag/inference.py: which CreateModel containers run locally, and the
refusal before the run of one that does not (stubs.py)."""

from __future__ import annotations

import pytest

from pipeline.local.dag.inference import FRAMEWORK, TFS, model_kind
from pipeline.local.dag.interpreter import DefinitionError
from pipeline.local.runner import PipelineRunner, RunOptions
from pipeline.local.store.storage import LocalStorage
from tests.pipeline.local.test_runner import Capture

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"


@pytest.mark.parametrize("container, kind", [
    ({"Image": f"{ECR}/tensorflow-inference:2.14-cpu", "ModelDataUrl": "s3://b/m.tar.gz"}, TFS),
    ({"Image": f"{ECR}/sagemaker-scikit-learn:1.2-1-cpu-py3", "Environment": {"SAGEMAKER_PROGRAM": "inference.py"}},
     FRAMEWORK),
    ({"Image": f"{ECR}/pytorch-inference:2.1-cpu-py310", "Environment": {"SAGEMAKER_PROGRAM": "inference.py"}},
     FRAMEWORK),
    # What the SDK's SKLearnModel(entry_point=...) writes (its own account's registry).
    ({"Image": "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3",
      "Environment": {"SAGEMAKER_PROGRAM": "inference.py",
                      "SAGEMAKER_SUBMIT_DIRECTORY": "s3://b/sagemaker-scikit-learn-1/sourcedir.tar.gz"}}, FRAMEWORK),
    ({"Image": f"{ECR}/tensorflow-inference:2.14-cpu", "Environment": {"SAGEMAKER_PROGRAM": "inference.py"}},
     FRAMEWORK),
    ({"Image": f"{ECR}/xgboost:1.7-1"}, None),
    ({"Image": f"{ECR}/sagemaker-scikit-learn:1.2-1-cpu-py3"}, None),  # no script: nothing to serve with
])
def test_model_kinds(container, kind):
    assert model_kind({"PrimaryContainer": container})[0] == kind


def test_a_model_it_cannot_serve_is_refused_before_the_run_naming_its_image(tmp_path):
    definition = {"Version": "2020-12-01", "Steps": [{"Name": "M", "Type": "Model", "Arguments": {
        "PrimaryContainer": {"Image": f"{ECR}/xgboost:1.7-1", "ModelDataUrl": "s3://b/m.tar.gz"}}}]}
    options = RunOptions(workdir=tmp_path, storage=LocalStorage(tmp_path / "store"), echo=False, stream=Capture())
    with pytest.raises(DefinitionError, match=r"cannot run step M \(Type Model: image .*xgboost:1.7-1 is neither"):
        PipelineRunner(definition, "p", options)
