"""Records the review of issue 47 found missing, made by tools/image_records.py (tools/image_records_make.sh):
PyTorch training and inference 1.2 to 1.5 (aws/deep-learning-containers), sagemaker-pytorch 0.4, 1.0 and 1.1
(aws/sagemaker-pytorch-container), SKLearn 0.20.0 (aws/sagemaker-scikit-learn-container) and the Hugging Face
images of 2021-2023 the SDK names (PyTorch training 1.6 to 1.10, inference 1.7 to 1.10; TensorFlow training 2.4
to 2.6, inference 2.4 to 2.6 and 2.11): one record per framework and transformers version, each read at the
commit whose buildspec built that pair. The URIs are the ones SDK v2's image_uris.retrieve gives."""

from __future__ import annotations

import pytest
from sagemaker import image_uris

from pipeline.images import catalog


def _fw(framework, version, py, instance, scope="training"):
    return dict(framework=framework, version=version, py_version=py, instance_type=instance, image_scope=scope)


def _hf(transformers, base, py, instance="ml.g5.xlarge", scope="training"):
    return dict(framework="huggingface", version=transformers, base_framework_version=base, py_version=py,
                instance_type=instance, image_scope=scope)


CPU, GPU = "ml.c5.xlarge", "ml.p3.2xlarge"


@pytest.mark.parametrize("retrieve, name, python, package, version", [
    (_fw("pytorch", "1.5.0", "py3", CPU), "aws-pytorch-training-1.5-cpu", "3.6", "torch", "==1.5.0"),
    (_fw("pytorch", "1.5.0", "py36", GPU), "aws-pytorch-training-1.5-gpu", "3.6", "torch", "==1.5.0"),
    (_fw("pytorch", "1.4.0", "py3", GPU, "inference"), "aws-pytorch-inference-1.4-gpu", "3.6", "torch", "==1.4.0"),
    (_fw("pytorch", "1.3.1", "py3", CPU), "aws-pytorch-training-1.3-cpu", "3.6", "torch", "==1.3.1"),
    (_fw("pytorch", "1.2.0", "py3", CPU, "inference"), "aws-pytorch-inference-1.2-cpu", "3.6", "torch", "==1.2.0"),
    (_fw("pytorch", "1.1.0", "py3", GPU), "aws-sagemaker-pytorch-1.1-gpu", "3.6", "torch", "==1.1.0"),
    (_fw("pytorch", "1.0.0", "py3", CPU, "inference"), "aws-sagemaker-pytorch-1.0-cpu", "3.6", "torch", "==1.0.0"),
    (_fw("pytorch", "0.4.0", "py3", CPU), "aws-sagemaker-pytorch-0.4-cpu", "3.5", "torch", "==0.4.0"),
    (dict(framework="sklearn", version="0.20.0", instance_type="ml.m5.xlarge"), "aws-sklearn-0.20.0", "3.7",
     "scikit-learn", ">=0.20.0"),
    (_hf("4.4.2", "pytorch1.6.0", "py36"), "aws-huggingface-pytorch-training-1.6-transformers4.4.2-gpu", "3.6",
     "transformers", "==4.4.2"),
    (_hf("4.6.1", "pytorch1.8.1", "py36"), "aws-huggingface-pytorch-training-1.8-transformers4.6.1-gpu", "3.6",
     "datasets", "==1.6.2"),
    (_hf("4.12.3", "pytorch1.9.1", "py38"), "aws-huggingface-pytorch-training-1.9-transformers4.12.3-gpu", "3.8",
     "torch", "==1.9.1"),  # the PyTorch training record it extends
    (_hf("4.17.0", "pytorch1.10.2", "py38"), "aws-huggingface-pytorch-training-1.10-transformers4.17.0-gpu", "3.8",
     "transformers", "==4.17.0"),
    (_hf("4.6.1", "pytorch1.7.1", "py36", CPU, "inference"),
     "aws-huggingface-pytorch-inference-1.7-transformers4.6.1-cpu", "3.6", "torch", "==1.7.1"),
    (_hf("4.11.0", "pytorch1.9.0", "py38", GPU, "inference"),
     "aws-huggingface-pytorch-inference-1.9-transformers4.11.0-gpu", "3.8", "transformers", "==4.11.0"),
    (_hf("4.5.0", "tensorflow2.4.1", "py37"), "aws-huggingface-tensorflow-training-2.4-transformers4.5.0-gpu", "3.7",
     "transformers", "==4.5.0"),
    (_hf("4.17.0", "tensorflow2.6.3", "py38"), "aws-huggingface-tensorflow-training-2.6-transformers4.17.0-gpu",
     "3.8", "transformers", "==4.17.0"),
    (_hf("4.12.3", "tensorflow2.5.1", "py37", CPU, "inference"),
     "aws-huggingface-tensorflow-inference-2.5-transformers4.12.3-cpu", "3.7", "transformers", "==4.12.3"),
    (_hf("4.26.0", "tensorflow2.11.0", "py39", GPU, "inference"),
     "aws-huggingface-tensorflow-inference-2.11-transformers4.26.0-gpu", "3.9", "transformers", "==4.26.0"),
])
def test_the_sdks_image_uri_finds_its_record(retrieve, name, python, package, version):
    for region in ("us-east-1", "eu-west-1"):
        uri = image_uris.retrieve(region=region, **retrieve)
        record = catalog.find(uri)
        assert record is not None and (record.name, record.python) == (name, python), uri
        assert record.packages[package] == version, uri


def test_every_hugging_face_pair_the_sdk_names_has_its_record():
    """Each (framework version, transformers version) the SDK's huggingface.json names, on CPU and GPU where
    the scope has both: the tag finds the record of that transformers version."""
    import json
    from pathlib import Path

    import sagemaker

    config = json.loads((Path(sagemaker.__file__).parent / "image_uri_config" / "huggingface.json").read_text())
    seen = 0
    for scope in ("training", "inference"):
        for transformers, frameworks in config[scope]["versions"].items():
            for base, entry in frameworks.items():
                if not base.startswith(("pytorch", "tensorflow")) or not isinstance(entry, dict):
                    continue
                instances = [GPU] if scope == "training" else [CPU, GPU]
                for instance in instances:
                    uri = image_uris.retrieve(region="us-east-1", **_hf(transformers, base, entry["py_versions"][0],
                                                                       instance, scope))
                    record = catalog.find(uri)
                    assert record is not None, uri
                    assert record.packages["transformers"] == f"=={transformers}", uri
                    seen += 1
    assert seen >= 40


def test_the_python_2_images_and_the_legacy_xgboost_algorithm_have_none():
    """The py2 images of 1.2 to 1.4 are not the py3 records'; XGBoost "1" (the SDK's alias "latest") is the
    legacy built-in algorithm's repository xgboost, not sagemaker-xgboost: no Dockerfile of it was found."""
    assert catalog.find(image_uris.retrieve(region="us-east-1", **_fw("pytorch", "1.2.0", "py2", CPU))) is None
    legacy = image_uris.retrieve(region="us-east-1", framework="xgboost", version="1", instance_type="ml.m5.xlarge")
    assert legacy.endswith("/xgboost:1") and catalog.find(legacy) is None


def test_no_new_record_claims_an_end_of_patch_date():
    prefixes = ("aws-pytorch-training-1.2-", "aws-pytorch-training-1.5-", "aws-pytorch-inference-1.3-",
                "aws-sagemaker-pytorch-", "aws-sklearn-0.20.0", "aws-huggingface-tensorflow-")
    found = [r for r in catalog.records() if r.name.startswith(prefixes)]
    assert len(found) >= 20 and not any(r.eop for r in found)
