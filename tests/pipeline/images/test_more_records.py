"""Records for more of the range (issue 47): AWS's PyTorch training 2.1 and 2.3 to 2.7 and TensorFlow
training 2.16, 2.18 and 2.19, CPU and GPU, made by tools/image_records.py (the commands in
tools/image_records_make.sh) from aws/deep-learning-containers at the last commits that held
their Dockerfiles, and AWS's published data for their Python and end of patch."""

from __future__ import annotations

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
TF219 = f"{ECR}/tensorflow-training:2.19.0-cpu-py312-ubuntu22.04-sagemaker"
COMMITS = {"aws-pytorch-training-2.1": "db1f25d50fd2e9633c2bf43846794c203d22d0c6",
           "aws-pytorch-training-2.3": "ea929428301aa13b6f1b7ff5f097ee3acaeb2cc6",
           "aws-pytorch-training-2.4": "161b71090917af2ef8cac6e466640748601f5f7c",
           "aws-pytorch-training-2.5": "1ca6a81abfca60a5031737a04952bdc3390bcc1c",
           "aws-pytorch-training-2.6": "dd3ba4642def128f9644025522d722cec3b713e9",
           "aws-pytorch-training-2.7": "e17a13ceaa4761298c4a27bff52a140b59a63612",
           "aws-tensorflow-training-2.16": "5f1467b9e5f383b7a28886940a7c00323f2fed51",
           "aws-tensorflow-training-2.18": "e76f361fc829de0a548c00b43b9e3cffe505c155",
           "aws-tensorflow-training-2.19": "d9590225bbc41de43d96b1118f9d7f6714ceca10"}


# The Python each version's images have (the SDK's image_uri_config py_versions, AWS's data).
PYTHON = {"aws-pytorch-training-2.1": "3.10", "aws-pytorch-training-2.3": "3.11", "aws-pytorch-training-2.4": "3.11", "aws-pytorch-training-2.5": "3.11",
          "aws-tensorflow-training-2.16": "3.10", "aws-tensorflow-training-2.18": "3.10"}


@pytest.mark.parametrize("uri, name, package, version, eop", [
    (f"{ECR}/pytorch-training:2.1.0-gpu-py310-cu121-ubuntu20.04-sagemaker", "aws-pytorch-training-2.1-gpu",
     "torch", "==2.1.0", "2024-10-04"),
    (f"{ECR}/pytorch-training:2.3.0-cpu-py311-ubuntu20.04-sagemaker", "aws-pytorch-training-2.3-cpu",
     "torch", "==2.3.0", "2025-04-24"),
    (f"{ECR}/pytorch-training:2.4-gpu-py311", "aws-pytorch-training-2.4-gpu", "torch", "==2.4.0+cu124", "2025-07-24"),
    (f"{ECR}/pytorch-training:2.5.1-cpu-py311", "aws-pytorch-training-2.5-cpu", "torch", "==2.5.1+cpu", "2025-10-29"),
    (f"{ECR}/pytorch-training:2.6.0-cpu-py312-ubuntu22.04-sagemaker", "aws-pytorch-training-2.6-cpu",
     "torch", "==2.6.0+cpu", "2026-01-29"),
    (f"{ECR}/pytorch-training:2.6-gpu-py312", "aws-pytorch-training-2.6-gpu", "torch", "==2.6.0+cu126", "2026-01-29"),
    (f"{ECR}/pytorch-training:2.7.1-cpu-py312", "aws-pytorch-training-2.7-cpu", "torch", "==2.7.1", "2026-04-23"),
    (f"{ECR}/pytorch-training:2.7-gpu-py312-ubuntu22.04-sagemaker-v1", "aws-pytorch-training-2.7-gpu",
     "torch", "==2.7.1", "2026-04-23"),
    # 2.16 keeps no core_packages.json: its TF wheel is read from the sagemaker stage's ARG TF_URL.
    (f"{ECR}/tensorflow-training:2.16.2-cpu-py310-ubuntu20.04-sagemaker", "aws-tensorflow-training-2.16-cpu",
     "tensorflow-cpu", "==2.16.2", "2025-03-07"),
    (f"{ECR}/tensorflow-training:2.16-gpu-py310", "aws-tensorflow-training-2.16-gpu", "tensorflow-gpu", "==2.16.2",
     "2025-03-07"),
    (f"{ECR}/tensorflow-training:2.18.0-cpu-py310-ubuntu22.04-sagemaker", "aws-tensorflow-training-2.18-cpu",
     "tensorflow-cpu", "==2.18.0", "2025-10-24"),
    (f"{ECR}/tensorflow-training:2.18-gpu-py310", "aws-tensorflow-training-2.18-gpu", "tensorflow-gpu", "==2.18.0",
     "2025-10-24"),
    (TF219, "aws-tensorflow-training-2.19-cpu", "tensorflow-cpu", "==2.19.0", "2026-03-11"),
    (f"{ECR}/tensorflow-training:2.19-gpu-py312-sagemaker", "aws-tensorflow-training-2.19-gpu",
     "tensorflow", "==2.19.0", "2026-03-11"),
])
def test_each_published_tag_finds_its_record_with_its_pins_and_end_of_patch(uri, name, package, version, eop):
    record = catalog.find(uri)
    python = PYTHON.get(name.rsplit("-", 1)[0], "3.12")
    assert record is not None and (record.name, record.python) == (name, python), uri
    assert (record.packages[package], record.eop) == (version, eop)
    commit = COMMITS[name.rsplit("-", 1)[0]]
    dockerfiles = [s for s in record.sources if "/docker/" in s["url"] and s["url"].endswith((".cpu", ".gpu"))]
    assert [s["commit"] for s in dockerfiles] == [commit] and commit in dockerfiles[0]["url"]


def test_tf_219_holds_what_its_pinned_packages_pull_in_and_not_lightgbm():
    """keras and ml_dtypes through tensorflow 2.19.0, matplotlib, gin and tf_slim through
    tf-models-official 2.19.1, sklearn and numba through shap: not refused (issue 47's false
    refusals on 2.14 were these); lightgbm is."""
    code = {"train.py": "import gin\nimport keras\nimport matplotlib\nimport ml_dtypes\nimport numba\n"
                        "import sklearn\nimport tensorflow as tf\nimport tf_slim\n"}
    assert check_code(code, TF219, None, step="Train", entry_points=["train.py"]).refusal is None
    refused = check_code({"train.py": "import tensorflow\nimport lightgbm\n"}, TF219, None, step="Train",
                         entry_points=["train.py"]).refusal
    assert refused.startswith(f"step Train: the code imports lightgbm (train.py:2), which the image {TF219} "
                              "(Python 3.12, record aws-tensorflow-training-2.19-cpu) does not have")


def test_an_unrecorded_version_between_records_is_judged_against_the_nearest():
    # 2.16 and 2.18 are as near: the older, by name.
    record, unchecked = catalog.nearest(f"{ECR}/tensorflow-training:2.17.0-cpu-py311")
    assert record.name == "aws-tensorflow-training-2.16-cpu, the nearest to tensorflow-training 2.17"
    assert record.python == "3.11" and "under Python 3.11 from its tag" in unchecked
