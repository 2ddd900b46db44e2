"""AWS's PyTorch images for ``-p Framework=pytorch``: the training image the training and
evaluation jobs run on, and the inference image the registered model names.

SageMaker: the SDK's ``image_uris`` (2.257) knows PyTorch training images up to 2.8, whose end
of patch was 2026-08-06, so the URIs are written here from AWS's published tags
(aws/deep-learning-containers ``docs/src/data/pytorch-training/2.10-{cpu,gpu}-sagemaker.yml``,
``pytorch-inference/2.6-{cpu,gpu}-sagemaker.yml``). 2.10 is supported to 2027-01-21; 2.6 is
the newest PyTorch inference image AWS publishes. The local runner maps each URI to its record
(``pipeline/images/records/aws-pytorch-{training-2.10,inference-2.6}-*.json``)."""

from __future__ import annotations

from pipeline.definition.instances import is_gpu

# SageMaker: the Deep Learning Containers' registry account in the commercial regions.
DLC_ACCOUNT = "763104351884"
TRAINING_VERSION = "2.10.0"
TRAINING_PY = "py313"
TRAINING_TAGS = {"cpu": "2.10.0-cpu-py313-ubuntu22.04-sagemaker",
                 "gpu": "2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker"}
INFERENCE_VERSION = "2.6.0"
INFERENCE_TAGS = {"cpu": "2.6.0-cpu-py312-ubuntu22.04-sagemaker",
                  "gpu": "2.6.0-gpu-py312-cu124-ubuntu22.04-sagemaker"}


def _device(instance_type: str) -> str:
    return "gpu" if is_gpu(instance_type) else "cpu"


def _uri(region: str, repository: str, tag: str) -> str:
    return f"{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{repository}:{tag}"


def training_image(region: str, instance_type: str) -> str:
    """The PyTorch training image for ``instance_type`` (its CPU or GPU variant)."""
    return _uri(region, "pytorch-training", TRAINING_TAGS[_device(instance_type)])


def inference_image(region: str, instance_type: str) -> str:
    return _uri(region, "pytorch-inference", INFERENCE_TAGS[_device(instance_type)])
