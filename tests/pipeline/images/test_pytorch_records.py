"""The records of AWS's PyTorch images (issue 44): 2.8, 2.9 and 2.10 training (CPU and GPU,
the SageMaker variants), the inference image the SDK pairs with them, and 2.2 as corrected.

SDK 2.257's image_uris knows PyTorch training up to 2.8.0 and inference up to 2.6.0
(image_uri_config/pytorch.json), so 2.9 and 2.10 are found by the tags AWS publishes
(aws/deep-learning-containers, docs/src/data/pytorch-training/<v>-<acc>-sagemaker.yml)."""

from __future__ import annotations

import json

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
PT29 = f"{ECR}/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker"


@pytest.mark.parametrize("tag, name, python, torch", [
    ("2.8.0-cpu-py312-ubuntu22.04-sagemaker", "aws-pytorch-training-2.8-cpu", "3.12", "==2.8.0"),
    ("2.8-gpu-py312", "aws-pytorch-training-2.8-gpu", "3.12", "==2.8.0"),
    ("2.9.0-cpu-py312-ubuntu22.04-sagemaker", "aws-pytorch-training-2.9-cpu", "3.12", "==2.9.0"),
    ("2.9.0-gpu-py312-cu130-ubuntu22.04-sagemaker", "aws-pytorch-training-2.9-gpu", "3.12", "==2.9.0"),
    ("2.9-cpu-py312-ubuntu22.04-sagemaker-v1", "aws-pytorch-training-2.9-cpu", "3.12", "==2.9.0"),
    ("2.10.0-cpu-py313-ubuntu22.04-sagemaker", "aws-pytorch-training-2.10-cpu", "3.13", "==2.10.0"),
    ("2.10-gpu-py313-cu130-ubuntu22.04-sagemaker-v1", "aws-pytorch-training-2.10-gpu", "3.13", "==2.10.0"),
    ("2.2.0-gpu-py310-cu121-ubuntu20.04-sagemaker", "aws-pytorch-training-2.2-gpu", "3.10", "==2.2.0"),
])
def test_each_published_tag_finds_its_record(tag, name, python, torch):
    record = catalog.find(f"{ECR}/pytorch-training:{tag}")
    assert record is not None and (record.name, record.python) == (name, python), tag
    assert record.packages["torch"] == torch


def test_the_sources_pin_a_commit_and_its_date():
    for record in catalog.records():
        if not record.name.startswith("aws-pytorch-"):
            continue
        for source in record.sources:
            if "deep-learning-containers" in source["url"]:
                assert source["commit"] in source["url"] and len(source["commit"]) == 40, source
                assert source["date"] <= record.retrieved, source
        # AWS publishes no end of patch for PyTorch 1.12 and older (test_older_pytorch_records.py).
        undated = ("aws-pytorch-training-1.6-", "aws-pytorch-training-1.7-", "aws-pytorch-training-1.8-",
                   "aws-pytorch-training-1.9-", "aws-pytorch-training-1.10-", "aws-pytorch-training-1.11-",
                   "aws-pytorch-training-1.12-", "aws-pytorch-inference-1.11-", "aws-pytorch-inference-1.12-",
                   "aws-pytorch-inference-1.6-", "aws-pytorch-inference-1.7-", "aws-pytorch-inference-1.8-",
                   "aws-pytorch-inference-1.9-", "aws-pytorch-inference-1.10-",
                   # 1.2 to 1.5 (training and inference): their Dockerfiles, no published dates.
                   *(f"aws-pytorch-{kind}-1.{minor}-" for kind in ("training", "inference") for minor in range(2, 6)))
        assert record.eop or record.name.startswith(undated), record.name


def test_what_each_record_says_as_aws_builds_it():
    pt = {r.name: r for r in catalog.records() if r.name.startswith("aws-pytorch-")}
    # 2.10 installs the SDK v3 (sagemaker>=3.0.0) and no sagemaker-experiments; 2.9 the v2 SDK.
    assert pt["aws-pytorch-training-2.10-cpu"].packages["sagemaker"] == ">=3.0.0"
    assert "sagemaker-experiments" not in pt["aws-pytorch-training-2.10-cpu"].packages
    assert pt["aws-pytorch-training-2.9-cpu"].packages["sagemaker"] == ">=2.254.1,<3"
    assert pt["aws-pytorch-training-2.9-cpu"].packages["torchvision"] == "==0.24.0"
    # GPU only: flash-attn, Transformer Engine; no Horovod in any PyTorch image.
    assert {"flash_attn", "transformer_engine"} <= pt["aws-pytorch-training-2.9-gpu"].modules
    assert "flash_attn" not in pt["aws-pytorch-training-2.9-cpu"].modules
    # (1.13 and older ship Horovod in their GPU images: test_older_pytorch_records.py.)
    assert not any("horovod" in r.modules for r in pt.values() if not r.name.startswith("aws-pytorch-training-1."))
    # 2.2, corrected: the GPU image adds SageMaker's data-parallel library, flash-attn and TE;
    # the Dockerfile's last release installs requests>=2.32.0 (core_packages.json still said 2.31.0).
    assert {"smdistributed", "flash_attn", "transformer_engine", "torchtnt"} <= pt["aws-pytorch-training-2.2-gpu"].modules
    assert "smdistributed" not in pt["aws-pytorch-training-2.2-cpu"].modules
    assert pt["aws-pytorch-training-2.2-cpu"].packages["requests"] == ">=2.32.0"
    assert pt["aws-pytorch-training-2.2-cpu"].packages["zstandard"] == ">=0.22.0"
    # matplotlib comes with seaborn (its pyproject.toml): not a false refusal.
    assert "matplotlib" in pt["aws-pytorch-training-2.9-cpu"].modules
    inference = pt["aws-pytorch-inference-2.6-cpu"]
    assert (inference.python, inference.packages["torch"], inference.packages["torchserve"]) == ("3.12", "==2.6.0+cpu", "==0.12.0")
    assert {"ts", "sagemaker_pytorch_serving_container"} <= inference.modules


def test_torch_and_torchvision_pass_on_29_and_a_module_it_lacks_is_refused():
    code = {"train.py": "import torch\nimport torchvision\nimport torch.distributed as dist\n"}
    assert check_code(code, PT29, None, step="Train", entry_points=["train.py"]).refusal is None
    refused = check_code({"train.py": "import torch\nimport lightgbm\n"}, PT29, None, step="Train",
                         entry_points=["train.py"]).refusal
    assert refused.startswith(f"step Train: the code imports lightgbm (train.py:2), which the image {PT29} "
                              "(Python 3.12, record aws-pytorch-training-2.9-cpu) does not have")


def test_the_generated_records_carry_the_generators_fields():
    """Made by tools/image_records.py (tested on a fixture: tests/tools/test_image_records.py)."""
    for record in catalog.records():
        if record.name.startswith("aws-pytorch-"):
            document = json.loads(record.path.read_text())
            assert {"eop", "ga", "horovod"} <= document.keys(), record.name


@pytest.mark.parametrize("uri, name, pinned", [
    # AWS's images built from a uv.lock (docker/<framework>/<v>/<cpu|cuda>/uv.lock): every package pinned.
    (f"{ECR}/pytorch:2.13.0-cpu-amzn2023-sagemaker", "aws-pytorch-2.13-cpu", {"torch": "==2.13.0+cpu"}),
    (f"{ECR}/pytorch:2.13-cu133-amzn2023-sagemaker", "aws-pytorch-2.13-gpu", {"torch": "==2.13.0+cu130"}),
    (f"{ECR}/pytorch:2.11.0-cpu-amzn2023-sagemaker", "aws-pytorch-2.11-cpu", {"torch": "==2.11.0+cpu"}),
    (f"{ECR}/tensorflow-training:2.21.0-cpu-py312-amzn2023-sagemaker", "aws-tensorflow-training-2.21-cpu",
     {"tensorflow-cpu": "==2.21.0", "sagemaker": "==3.11.0"}),
    (f"{ECR}/tensorflow-training:2.21-gpu-py312-sagemaker", "aws-tensorflow-training-2.21-gpu",
     {"tensorflow": "==2.21.0"}),
])
def test_the_images_built_from_a_lock_have_every_package_at_its_version(uri, name, pinned):
    record = catalog.find(uri)
    assert record is not None and record.name == name and record.python == "3.12", uri
    assert {k: record.packages[k] for k in pinned} == pinned
    assert all(v.startswith("==") for v in record.packages.values())
    assert {"numpy", "matplotlib", "sagemaker"} <= record.modules and "horovod" not in record.modules

