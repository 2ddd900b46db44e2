"""Records of AWS's Hugging Face PyTorch images (issue 47): training 1.13, 2.0, 2.1, 2.3, 2.5 to 2.9 (GPU) and
inference 1.13, 2.0, 2.1, 2.3 and 2.6 (CPU, GPU), made by tools/image_records.py (the commands in
tools/image_records_make.sh) from the Dockerfiles at the commit before huggingface/pytorch was deleted from
aws/deep-learning-containers, and AWS's published data (Python, tags, transformers version). A training
image is built FROM AWS's PyTorch training image: its record extends that one's."""

from __future__ import annotations

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
COMMIT = "eef459b8c9121ef0cc49375228cbf33452d8126e"


@pytest.mark.parametrize("tag, name, python, transformers, torch", [
    ("huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04",
     "aws-huggingface-pytorch-training-2.9-gpu", "3.12", "==5.3.0", "==2.9.0"),
    # 2.6 to 2.8: no published data file; Python from the FROM image's tag, transformers from the ARG default.
    ("huggingface-pytorch-training:2.8.0-transformers4.56.2-gpu-py312-cu129-ubuntu22.04",
     "aws-huggingface-pytorch-training-2.8-gpu", "3.12", "==4.56.2", "==2.8.0"),
    ("huggingface-pytorch-training:2.7.1-transformers4.55.0-gpu-py312-cu128-ubuntu22.04",
     "aws-huggingface-pytorch-training-2.7-gpu", "3.12", "==4.55.0", "==2.7.1"),
    ("huggingface-pytorch-training:2.6.0-transformers4.51.3-gpu-py312-cu126-ubuntu22.04",
     "aws-huggingface-pytorch-training-2.6-gpu", "3.12", "==4.51.3", "==2.6.0+cu126"),
    # 2.3: transformers and datasets are build args; its buildspec gives them.
    ("huggingface-pytorch-training:2.3.0-transformers4.48.0-gpu-py311-cu121-ubuntu20.04",
     "aws-huggingface-pytorch-training-2.3-gpu", "3.11", "==4.48.0", "==2.3.0"),
    ("huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04",
     "aws-huggingface-pytorch-training-2.5-gpu", "3.11", "==4.49.0", "==2.5.1+cu124"),
    ("huggingface-pytorch-training:2.1.0-transformers4.36.0-gpu-py310-cu121-ubuntu20.04",
     "aws-huggingface-pytorch-training-2.1-gpu", "3.10", "==4.36.0", "==2.1.0"),
    ("huggingface-pytorch-training:2.0.0-transformers4.28.1-gpu-py310-cu118-ubuntu20.04",
     "aws-huggingface-pytorch-training-2.0-gpu", "3.10", "==4.28.1", "==2.0.1"),
    ("huggingface-pytorch-training:1.13.1-transformers4.26.0-gpu-py39-cu117-ubuntu20.04",
     "aws-huggingface-pytorch-training-1.13-gpu", "3.9", "==4.26.0", "==1.13.1+cu117"),
    ("huggingface-pytorch-inference:2.6.0-transformers5.5.3-cpu-py312-ubuntu22.04",
     "aws-huggingface-pytorch-inference-2.6-cpu", "3.12", "==5.5.3", "==2.6.0+cpu"),
    ("huggingface-pytorch-inference:2.1.0-transformers4.37.0-gpu-py310-cu118-ubuntu20.04",
     "aws-huggingface-pytorch-inference-2.1-gpu", "3.10", "==4.37.0", "==2.1.0+cu118"),
    # inference 2.3, 2.0, 1.13: no published data file; transformers from the buildspec, Python from the ARG
    # (the SDK's huggingface.json names these tags).
    ("huggingface-pytorch-inference:2.3.0-transformers4.48.0-cpu-py311-ubuntu22.04",
     "aws-huggingface-pytorch-inference-2.3-cpu", "3.11", "==4.48.0", "==2.3.0+cpu"),
    ("huggingface-pytorch-inference:2.3.0-transformers4.48.0-gpu-py311-cu121-ubuntu22.04",
     "aws-huggingface-pytorch-inference-2.3-gpu", "3.11", "==4.48.0", "==2.3.0+cu121"),
    ("huggingface-pytorch-inference:2.0.0-transformers4.28.1-cpu-py310-ubuntu20.04",
     "aws-huggingface-pytorch-inference-2.0-cpu", "3.10", "==4.28.1", "==2.0.0+cpu"),
    ("huggingface-pytorch-inference:2.0.0-transformers4.28.1-gpu-py310-cu118-ubuntu20.04",
     "aws-huggingface-pytorch-inference-2.0-gpu", "3.10", "==4.28.1", "==2.0.0+cu118"),
    ("huggingface-pytorch-inference:1.13.1-transformers4.26.0-cpu-py39-ubuntu20.04",
     "aws-huggingface-pytorch-inference-1.13-cpu", "3.9", "==4.26.0", "==1.13.1+cpu"),
    ("huggingface-pytorch-inference:1.13.1-transformers4.26.0-gpu-py39-cu117-ubuntu20.04",
     "aws-huggingface-pytorch-inference-1.13-gpu", "3.9", "==4.26.0", "==1.13.1+cu117"),
])
def test_each_published_tag_finds_its_record(tag, name, python, transformers, torch):
    record = catalog.find(f"{ECR}/{tag}")
    assert record is not None and (record.name, record.python) == (name, python), tag
    assert (record.packages["transformers"], record.packages["torch"]) == (transformers, torch)
    assert {"transformers", "torch"} <= record.modules
    assert ("datasets" in record.modules) == ("training" in name)  # the inference images install no datasets
    dockerfiles = [s for s in record.sources if s["file"].startswith("huggingface/pytorch/") and "/docker/" in s["file"]]
    assert len(dockerfiles) == 1 and dockerfiles[0]["url"].endswith(f"/{dockerfiles[0]['commit']}/{dockerfiles[0]['file']}")
    assert dockerfiles[0]["date"] <= "2026-11-28"


@pytest.mark.parametrize("version, datasets, buildspec", [
    ("1.13", "==2.16.1", "buildspec-1-13.yml"), ("2.0", "==2.16.1", "buildspec-2-0.yml"),
    ("2.1", "==2.18.0", "buildspec-2-1.yml"), ("2.3", "==3.1.0", "buildspec-2-3-0.yml")])
def test_datasets_is_pinned_from_the_buildspec_where_the_dockerfile_leaves_it_to_a_build_arg(version, datasets,
                                                                                            buildspec):
    """``datasets==${DATASETS_VERSION}``, an ARG without a default: AWS's builder passes the buildspec's
    ``datasets_version`` (src/image_builder.py); the record pins it and names that buildspec."""
    record = next(r for r in catalog.records() if r.name == f"aws-huggingface-pytorch-training-{version}-gpu")
    assert record.packages["datasets"] == datasets
    (source,) = [s for s in record.sources if s["file"] == f"huggingface/pytorch/training/{buildspec}"]
    assert f"DATASETS_VERSION={datasets[2:]}" in source["what"] and source["url"].endswith(f"/{source['commit']}/{source['file']}")


def test_a_training_record_extends_the_pytorch_record_and_another_transformers_is_not_it():
    record = catalog.find(f"{ECR}/huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04")
    assert record.extends == "aws-pytorch-training-2.9-gpu" and "flash_attn" in record.modules
    assert catalog.find(f"{ECR}/huggingface-pytorch-training:2.9.0-transformers4.99.0-gpu-py312-cu130") is None
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f"HF={COMMIT}" in script


def test_a_transformers_script_passes_and_lightgbm_is_refused():
    image = f"{ECR}/huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
    code = {"train.py": "import torch\nimport transformers\nimport datasets\nimport evaluate\nimport pandas\n"}
    assert check_code(code, image, None, step="Train", entry_points=["train.py"]).refusal is None
    refused = check_code({"train.py": "import transformers\nimport lightgbm\n"}, image, None, step="Train",
                         entry_points=["train.py"]).refusal
    assert "(Python 3.11, record aws-huggingface-pytorch-training-2.5-gpu) does not have" in refused


@pytest.mark.parametrize("version, buildspec", [("2.3", "buildspec-2-3-0.yml"), ("2.0", "buildspec-2-0-0.yml"),
                                                ("1.13", "buildspec-1-13-1.yml")])
def test_inference_transformers_is_pinned_from_the_buildspec(version, buildspec):
    """``ARG TRANSFORMERS_VERSION`` has no default in these inference Dockerfiles: the record names the
    buildspec that gives it."""
    for accelerator in ("cpu", "gpu"):
        record = next(r for r in catalog.records() if r.name == f"aws-huggingface-pytorch-inference-{version}-{accelerator}")
        (source,) = [s for s in record.sources if s["file"] == f"huggingface/pytorch/inference/{buildspec}"]
        assert source["what"].endswith(f"TRANSFORMERS_VERSION={record.packages['transformers'][2:]}")
        assert source["url"].endswith(f"/{source['commit']}/{source['file']}")
