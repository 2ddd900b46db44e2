"""Records of AWS's PyTorch training images 2.0, 1.13, 1.12, 1.11 and 1.6 to 1.9 (issue 47), CPU and GPU,
made by tools/image_records.py (the commands in tools/image_records_make.sh) from each version's
Dockerfile at the commit before the one that deleted its folder from aws/deep-learning-containers.
Python: the Dockerfile's ARG PYTHON_VERSION (the SDK's image_uri_config/pytorch.json agrees); GA and end
of patch: AWS's support table for 2.0 and 1.13, unpublished for the rest. 1.10's SageMaker image is built
FROM its EC2 image (Dockerfile.sagemaker.<acc> over Dockerfile.ec2.<acc>)."""

from __future__ import annotations

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
# version: (commit, Python, torch (CPU), torch (GPU), the GPU image's CUDA folder, end of patch)
VERSIONS = {
    "2.0": ("cfe1b79db1ef6b30b1d10f95a6dddb8f1af36854", "3.10", "==2.0.1", "==2.0.1", "cu118", "2024-03-15"),
    "1.13": ("7044c179b128cb9dab392fde471b001df1d5265d", "3.9", "==1.13.1+cpu", "==1.13.1+cu117", "cu117",
             "2024-10-28"),
    "1.12": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.12.1+cpu", "==1.12.1+cu113", "cu113", None),
    "1.11": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.11.0+cpu", "==1.11.0+cu115", "cu115", None),
    "1.10": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.10.2+cpu", "==1.10.2+cu113", "cu113", None),
    "1.9": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.9.1", "==1.9.1", "cu111", None),
    "1.8": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.6", "==1.8.1", "==1.8.1", "cu111", None),
    "1.7": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.6", "==1.7.1", "==1.7.1", "cu110", None),
    "1.6": ("58a21e4b6915f2d4584abf417e63e3920bf97a48", "3.6", "==1.6.0", "==1.6.0", "cu110", None),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("accelerator", ["cpu", "gpu"])
def test_each_version_finds_its_record_with_its_pins(version, accelerator):
    _commit, python, cpu, gpu, cuda, eop = VERSIONS[version]
    py = "py" + python.replace(".", "")
    record = catalog.find(f"{ECR}/pytorch-training:{version}.0-{accelerator}-{py}")
    assert record is not None and record.name == f"aws-pytorch-training-{version}-{accelerator}"
    assert (record.python, record.eop) == (python, eop)
    assert record.packages["torch"] == (cpu if accelerator == "cpu" else gpu) and "torch" in record.modules
    folder = "py3" if accelerator == "cpu" else f"py3/{cuda}"
    sagemaker = ".sagemaker" if version == "1.10" else ""
    dockerfile = f"pytorch/training/docker/{version}/{folder}/Dockerfile{sagemaker}.{accelerator}"
    dlc = [s for s in record.sources if "deep-learning-containers" in s["url"]]
    assert dockerfile in {s["file"] for s in dlc}
    for source in dlc:
        assert len(source["commit"]) == 40 and source["url"].endswith(f"/{source['commit']}/{source['file']}")
        assert source["date"] <= record.retrieved


def test_the_generator_script_names_each_records_commit():
    from pathlib import Path

    script = (Path(__file__).resolve().parents[3] / "tools" / "image_records_make.sh").read_text()
    for version, (commit, *_rest) in VERSIONS.items():
        assert f'"{version} {commit}' in script or f"c={commit}; df=pytorch/training/docker/{version}/" in script, version


def test_what_the_images_hold():
    records = {r.name: r for r in catalog.records() if r.name.startswith("aws-pytorch-training-")}
    # SageMaker's distributed libraries and Horovod only in the GPU images (Horovod up to 1.13, none in 2.0).
    assert {"smdistributed", "horovod"} <= records["aws-pytorch-training-1.12-gpu"].modules
    assert "horovod" in records["aws-pytorch-training-1.13-gpu"].modules
    assert "horovod" not in records["aws-pytorch-training-2.0-gpu"].modules
    assert "horovod" not in records["aws-pytorch-training-1.12-cpu"].modules
    assert "smdistributed" in records["aws-pytorch-training-2.0-gpu"].modules
    # torch 2.0 requires sympy, networkx, jinja2 (its wheel's METADATA); matplotlib through seaborn.
    assert {"sympy", "networkx", "jinja2", "matplotlib"} <= records["aws-pytorch-training-2.0-cpu"].modules
    assert records["aws-pytorch-training-2.0-cpu"].packages["accelerate"] == "==0.22.0"


def test_a_module_the_13_image_lacks_is_refused():
    image = f"{ECR}/pytorch-training:1.13.1-gpu-py39-cu117-ubuntu20.04-sagemaker"
    code = {"train.py": "import torch\nimport torchvision\nimport pandas\nimport sklearn\n"}
    assert check_code(code, image, None, step="Train", entry_points=["train.py"]).refusal is None
    refused = check_code({"train.py": "import torch\nimport lightgbm\n"}, image, None, step="Train",
                         entry_points=["train.py"]).refusal
    assert refused.startswith(f"step Train: the code imports lightgbm (train.py:2), which the image {image} "
                              "(Python 3.9, record aws-pytorch-training-1.13-gpu) does not have")
