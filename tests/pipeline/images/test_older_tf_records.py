"""Records of AWS's TensorFlow training images 1.15 and 2.0 to 2.13 (issue 47), CPU and GPU, made by
tools/image_records.py (the commands in tools/image_records_make.sh) from each version's Dockerfile at
the commit before the one that deleted its folder from aws/deep-learning-containers. AWS publishes no
GA or end-of-patch date for them (eop null); the Python is the Dockerfile's ARG PYTHON_VERSION, which
the SDK's image_uri_config/tensorflow.json agrees with. 2.7's SageMaker image is built FROM its EC2 image
(Dockerfile.sagemaker.<acc> over Dockerfile.ec2.<acc>)."""

from __future__ import annotations

import json

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
# version: (the commit the record's Dockerfile was read at, Python, TF version, CUDA folder of the GPU image)
VERSIONS = {
    "2.13": ("124a414fb228c7fe7f78b7ccb35f90b4fb67bc60", "3.10", "2.13.0", "cu118"),
    "2.12": ("89e1b3471ebe35768b12555650baf2f9a59c00aa", "3.10", "2.12.0", "cu118"),
    "2.11": ("0ade7eefabc060fc70fb3fcfbc93c88c99352d8b", "3.9", "2.11.1", "cu112"),
    "2.10": ("44f39959e3eea673ebbe57a18f454999f9fb658a", "3.9", "2.10.1", "cu112"),
    "2.9": ("2b1ffa1db7a5782e816a2a3314c1ee80af099e7a", "3.9", "2.9.3", "cu112"),
    "2.8": ("a65eb78a976918b78bd2e6b1f415468005ce7994", "3.9", "2.8.4", "cu112"),
    "2.7": ("d91d6c184c07d5101c472b5b1972dea1d8c85e2c", "3.8", "2.7.4", "cu112"),
    "2.6": ("3e717d20db19b3c962141db2734b8ce2345c1ba0", "3.8", "2.6.3", "cu112"),
    "2.5": ("a030c0aab0d91657fb5607bc1d1547382fe9f11f", "3.7", "2.5.1", "cu112"),
    "2.4": ("fa6314c2e46f2c3576b2dedfd2211f228ffc6c6a", "3.7", "2.4.3", "cu110"),
    "2.3": ("8209021ae2af039feece22d1d62ab91513553a8e", "3.7", "2.3.4", "cu110"),
    "2.2": ("e578e2e49877a5af4ae65266485956e6577de82d", "3.7", "2.2.2", "cu102"),
    "2.1": ("e578e2e49877a5af4ae65266485956e6577de82d", "3.6", "2.1.3", "cu101"),
    "2.0": ("e578e2e49877a5af4ae65266485956e6577de82d", "3.6", "2.0.4", "cu100"),
    "1.15": ("12ece23a1a2566fbd6a6ee7856733395d9844bbd", "3.7", "1.15.5", "cu110"),
}


def _sources_at(record, dockerfile: str) -> None:
    """The Dockerfile is named once, pinned to the commit that last changed it (as of the commit the
    make script names), with that commit's date; every DLC source is pinned so."""
    dlc = [s for s in record.sources if "deep-learning-containers" in s["url"]]
    (source,) = [s for s in dlc if s["file"] == dockerfile]
    assert "ARG PYTHON_VERSION (Python" in source["what"] and "no GA or end-of-patch date" in source["what"]
    for source in dlc:
        assert len(source["commit"]) == 40 and source["url"].endswith(f"/{source['commit']}/{source['file']}")
        assert source["date"] <= record.retrieved


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("accelerator", ["cpu", "gpu"])
def test_each_version_finds_its_record_with_its_pins(version, accelerator):
    _commit, python, tf, cuda = VERSIONS[version]
    py = "py" + python.replace(".", "")
    record = catalog.find(f"{ECR}/tensorflow-training:{version}.0-{accelerator}-{py}")
    assert record is not None and record.name == f"aws-tensorflow-training-{version}-{accelerator}"
    assert record.python == python and record.eop is None
    wheel = "tensorflow" if version == "2.7" else "tensorflow-cpu" if accelerator == "cpu" else "tensorflow-gpu"
    assert record.packages[wheel] == f"=={tf}" and "tensorflow" in record.modules
    folder = "py3" if accelerator == "cpu" else f"py3/{cuda}"
    sagemaker = ".sagemaker" if version == "2.7" else ""
    _sources_at(record, f"tensorflow/training/docker/{version}/{folder}/Dockerfile{sagemaker}.{accelerator}")
    document = json.loads(record.path.read_text())
    assert {"eop", "ga", "horovod"} <= document.keys()


def test_the_generator_script_names_each_records_commit():
    """tools/image_records_make.sh makes them at the commits this test pins."""
    from pathlib import Path

    script = (Path(__file__).resolve().parents[3] / "tools" / "image_records_make.sh").read_text()
    for version, (commit, *_rest) in VERSIONS.items():
        assert f"{version} {commit}" in script or f"c={commit}; df=tensorflow/training/docker/{version}/" in script, version


def test_what_each_image_holds_as_its_dockerfile_says():
    records = {r.name: r for r in catalog.records() if r.name.startswith("aws-tensorflow-training-")}
    # 2.13 dropped Horovod; 2.12 and older ship it (2.2 to 2.5 install it after an empty continuation line).
    assert not records["aws-tensorflow-training-2.13-cpu"].packages.get("horovod")
    assert records["aws-tensorflow-training-2.12-cpu"].packages["horovod"] == "==0.27.0"
    assert records["aws-tensorflow-training-2.4-cpu"].packages["horovod"] == "==0.21.0"
    # matplotlib through tf-models-official or seaborn; not in 2.1 to 2.3, which install neither.
    assert "matplotlib" in records["aws-tensorflow-training-2.8-cpu"].modules
    assert "matplotlib" not in records["aws-tensorflow-training-2.3-cpu"].modules
    assert records["aws-tensorflow-training-2.1-cpu"].packages["keras"] == "==2.3.1"
    assert records["aws-tensorflow-training-1.15-cpu"].packages["scikit-learn"] == "==0.20.3"
    # 2.7: the EC2 image's installs (TF, Horovod), then the SageMaker Dockerfile's (sagemaker, shap).
    tf27 = records["aws-tensorflow-training-2.7-gpu"]
    assert (tf27.packages["tensorflow"], tf27.packages["horovod"], tf27.packages["sagemaker"]) == ("==2.7.4", "==0.25.0", ">=2,<3")
    assert {s["file"] for s in tf27.sources} >= {"tensorflow/training/docker/2.7/py3/cu112/Dockerfile.sagemaker.gpu",
                                                 "tensorflow/training/docker/2.7/py3/cu112/Dockerfile.ec2.gpu"}


def test_aws_ml_ops_example_on_24_passes_tensorflow_and_refuses_lightgbm():
    """Issue 47: tensorflow-training:2.4.1-cpu-py37 (AWS's ml_ops example) is checked against its record."""
    image = f"{ECR}/tensorflow-training:2.4.1-cpu-py37"
    code = {"train.py": "import argparse\nimport numpy as np\nimport pandas as pd\nimport tensorflow as tf\n"
                        "import sklearn\nimport horovod.tensorflow.keras as hvd\n"}
    assert check_code(code, image, None, step="Train", entry_points=["train.py"]).refusal is None
    refused = check_code({"train.py": "import tensorflow\nimport lightgbm\n"}, image, None, step="Train",
                         entry_points=["train.py"]).refusal
    assert refused.startswith(f"step Train: the code imports lightgbm (train.py:2), which the image {image} "
                              "(Python 3.7, record aws-tensorflow-training-2.4-cpu) does not have")
