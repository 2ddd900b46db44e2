"""The image URIs SDK v2's image_uris.retrieve gives for the versions issue 47 recorded find their records,
with the Python the record says (every family: TF and PyTorch training, SKLearn, XGBoost, Hugging Face)."""

from __future__ import annotations

import pytest
from sagemaker import image_uris

from pipeline.images import catalog


def _training(framework, version, py, instance):
    return dict(framework=framework, version=version, py_version=py, instance_type=instance, image_scope="training")


def _hf(version, pytorch, py):
    return dict(framework="huggingface", version=version, base_framework_version=pytorch, py_version=py,
                instance_type="ml.g5.xlarge", image_scope="training")


@pytest.mark.parametrize("retrieve, name, python", [
    (_training("tensorflow", "2.13", "py310", "ml.c5.xlarge"), "aws-tensorflow-training-2.13-cpu", "3.10"),
    (_training("tensorflow", "2.13", "py310", "ml.p3.2xlarge"), "aws-tensorflow-training-2.13-gpu", "3.10"),
    (_training("tensorflow", "2.4.1", "py37", "ml.c5.xlarge"), "aws-tensorflow-training-2.4-cpu", "3.7"),
    (_training("tensorflow", "2.7.1", "py38", "ml.p3.2xlarge"), "aws-tensorflow-training-2.7-gpu", "3.8"),
    (_training("tensorflow", "2.1.3", "py36", "ml.c5.xlarge"), "aws-tensorflow-training-2.1-cpu", "3.6"),
    (_training("tensorflow", "2.0.4", "py36", "ml.c5.xlarge"), "aws-tensorflow-training-2.0-cpu", "3.6"),
    (_training("tensorflow", "1.15.5", "py37", "ml.p3.2xlarge"), "aws-tensorflow-training-1.15-gpu", "3.7"),
    (_training("pytorch", "2.0.1", "py310", "ml.g5.xlarge"), "aws-pytorch-training-2.0-gpu", "3.10"),
    (_training("pytorch", "1.13.1", "py39", "ml.c5.xlarge"), "aws-pytorch-training-1.13-cpu", "3.9"),
    (_training("pytorch", "1.10.2", "py38", "ml.g5.xlarge"), "aws-pytorch-training-1.10-gpu", "3.8"),
    (_training("pytorch", "1.8.1", "py36", "ml.c5.xlarge"), "aws-pytorch-training-1.8-cpu", "3.6"),
    (_training("pytorch", "1.6.0", "py36", "ml.p3.2xlarge"), "aws-pytorch-training-1.6-gpu", "3.6"),
    (dict(framework="sklearn", version="1.0-1", instance_type="ml.m5.xlarge"), "aws-sklearn-1.0-1", "3.8"),
    (dict(framework="sklearn", version="1.4-2", instance_type="ml.m5.xlarge"), "aws-sklearn-1.4-2", "3.10"),
    (dict(framework="xgboost", version="1.7-1", instance_type="ml.m5.xlarge"), "aws-xgboost-1.7-1", "3.9"),
    (dict(framework="xgboost", version="1.0-1", py_version="py3", instance_type="ml.m5.xlarge"), "aws-xgboost-1.0-1", "3.7"),
    (dict(framework="xgboost", version="3.0-5", instance_type="ml.m5.xlarge"), "aws-xgboost-3.0-5", "3.10"),
    (_hf("4.56.2", "pytorch2.8.0", "py312"), "aws-huggingface-pytorch-training-2.8-gpu", "3.12"),
    (_hf("4.49.0", "pytorch2.5.1", "py311"), "aws-huggingface-pytorch-training-2.5-gpu", "3.11"),
    (_hf("4.36.0", "pytorch2.1.0", "py310"), "aws-huggingface-pytorch-training-2.1-gpu", "3.10"),
])
def test_the_sdks_image_uri_finds_its_record(retrieve, name, python):
    for region in ("us-east-1", "eu-west-1"):
        uri = image_uris.retrieve(region=region, **retrieve)
        record = catalog.find(uri)
        assert record is not None and (record.name, record.python) == (name, python), uri
