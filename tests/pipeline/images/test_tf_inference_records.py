"""Records of AWS's TensorFlow inference images 2.8 to 2.13 (issue 47), CPU and GPU, made by
tools/image_records.py (tools/image_records_make.sh) from each version's Dockerfile (its sagemaker
stage) at the commit before the one that deleted its folder (2.11: the one its buildspec builds the
SageMaker image from). The SDK's tags name no Python."""

from __future__ import annotations

import pytest
from sagemaker import image_uris

from pipeline.images import catalog

VERSIONS = {  # SDK version: (record version, commit, Python, tensorflow-serving-api)
    "2.13": ("2.13", "1aaed129ad23ddd9a61bcc2996e91a73f9ca5fec", "3.10", "==2.13.0"),
    "2.12": ("2.12", "28e34a026d52cc796c589239515c55dedbc2f53f", "3.10", "==2.12.1"),
    "2.11": ("2.11", "1aaed129ad23ddd9a61bcc2996e91a73f9ca5fec", "3.9", "==2.11.1"),
    "2.10": ("2.10", "48dd0f2e0d239691b53a836b9944ab120d6cc3b9", "3.9", "==2.10.1"),
    "2.9": ("2.9", "cfffb7538d5d424f26a808a2e599df278f3f90f0", "3.9", "==2.9.3"),
    "2.8": ("2.8", "be6176382de0a7e64428a4f515bda779e756f769", "3.9", None),
}


@pytest.mark.parametrize("sdk_version", VERSIONS)
@pytest.mark.parametrize("instance, accelerator", [("ml.m5.large", "cpu"), ("ml.g5.xlarge", "gpu")])
def test_the_sdks_inference_uri_finds_its_record(sdk_version, instance, accelerator):
    version, commit, python, serving = VERSIONS[sdk_version]
    uri = image_uris.retrieve(framework="tensorflow", region="us-east-1", version=sdk_version, instance_type=instance,
                              image_scope="inference")
    record = catalog.find(uri)
    assert record is not None and (record.name, record.python, record.eop) == (
        f"aws-tensorflow-inference-{version}-{accelerator}", python, None), uri
    assert "tensorflow_serving" in record.modules and "tensorflow" not in record.packages  # --no-dependencies
    if serving and accelerator == "cpu":
        assert record.packages["tensorflow-serving-api"] == serving
    (dockerfile,) = [s for s in record.sources if "deep-learning-containers" in s["url"] and "/docker/" in s["file"]]
    cuda = "" if accelerator == "cpu" else "cu118/" if version in ("2.12", "2.13") else "cu112/"
    assert dockerfile["file"] == f"tensorflow/inference/docker/{version}/py3/{cuda}Dockerfile.{accelerator}"
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f'"{version} {commit}' in script


def test_211s_dockerfile_is_the_one_its_buildspec_builds_the_sagemaker_image_from():
    """2.11 had Dockerfiles for py39 and py310 under the same tags; the record reads the one
    buildspec-2-11.yml's sagemaker entry names (docker/2.11/py3/Dockerfile.cpu, tag py39)."""
    record = catalog.find("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.11.1-cpu")
    files = {s["file"]: s for s in record.sources}
    assert set(files) == {"tensorflow/inference/docker/2.11/py3/Dockerfile.cpu", "tensorflow/inference/buildspec-2-11.yml"}
    assert files["tensorflow/inference/buildspec-2-11.yml"]["what"].startswith("which Dockerfile the sagemaker image")


def test_214_keeps_its_record():
    uri = image_uris.retrieve(framework="tensorflow", region="us-east-1", version="2.14", instance_type="ml.m5.large",
                              image_scope="inference")
    assert catalog.find(uri).name == "aws-tensorflow-inference-2.14"


NEWER = {  # SDK version: (commit in image_records_make.sh, Python, end of patch, tensorflow-serving-api)
    "2.19": ("43000050f3f7f4ebbf3bea1f4b0aa8df4efacb1c", "3.12", "2026-03-11", "==2.19.0"),
    "2.18": ("1e3d06facceba89894c8414cfdca29b7e5466186", "3.10", "2025-10-24", "==2.18.0"),
    "2.16": ("7c9758f3779827497b47978fe14c4e48b7106806", "3.10", "2025-03-07", "==2.16.1"),
}


@pytest.mark.parametrize("sdk_version", NEWER)
@pytest.mark.parametrize("instance, accelerator", [("ml.m5.large", "cpu"), ("ml.g5.xlarge", "gpu")])
def test_the_sdks_newer_inference_uris_find_their_records(sdk_version, instance, accelerator):
    """2.16, 2.18, 2.19 (the last commit on master that touched each folder, with core_packages.json):
    2.19's Python and dates from AWS's published data, 2.16's and 2.18's from the Dockerfile's ARG
    PYTHON_VERSION and the support table's TensorFlow row."""
    commit, python, eop, serving = NEWER[sdk_version]
    uri = image_uris.retrieve(framework="tensorflow", region="us-east-1", version=sdk_version, instance_type=instance,
                              image_scope="inference")
    record = catalog.find(uri)
    assert record is not None and (record.name, record.python, record.eop) == (
        f"aws-tensorflow-inference-{sdk_version}-{accelerator}", python, eop), uri
    assert "tensorflow_serving" in record.modules and "tensorflow" not in record.packages
    serving_name = "tensorflow-serving-api" + ("" if accelerator == "cpu" else "-gpu")
    assert record.packages[serving_name] == serving
    cuda = "" if accelerator == "cpu" else "cu122/"
    assert any(s["file"] == f"tensorflow/inference/docker/{sdk_version}/py3/{cuda}Dockerfile.{accelerator}"
               for s in record.sources)
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f'"{sdk_version} {commit}' in script


OLDER = {  # SDK version: (commit in image_records_make.sh, GPU folder, Python, tensorflow-serving-api)
    "2.6": ("0cd72b29b64601f1c4ddf8230c08eecd8d8448a5", "cu112", "3.8", "==2.6.0"),
    "2.5": ("1a8e0d99958255b8dac62452744e7292a7c3fcf5", "cu112", "3.7", "==2.5.1"),
    "2.4": ("5d234e54f4736a9f7c84b7764fbd8137d067eadf", "cu110", "3.7", "==2.4.0"),
    "2.3": ("48b60facf8f743552d146c04e8b522303cfa4acb", "cu102", "3.7", "==2.3"),
    "2.2": ("48b60facf8f743552d146c04e8b522303cfa4acb", "cu102", "3.7", "==2.2.0"),
}


@pytest.mark.parametrize("sdk_version", OLDER)
@pytest.mark.parametrize("instance, accelerator", [("ml.m5.large", "cpu"), ("ml.p3.2xlarge", "gpu")])
def test_the_sdks_older_inference_uris_find_their_records(sdk_version, instance, accelerator):
    """2.2 to 2.6: the one-stage Dockerfile each version's buildspec builds the inference image from."""
    commit, cuda, python, serving = OLDER[sdk_version]
    uri = image_uris.retrieve(framework="tensorflow", region="us-east-1", version=sdk_version, instance_type=instance,
                              image_scope="inference")
    record = catalog.find(uri)
    assert record is not None and (record.name, record.python, record.eop) == (
        f"aws-tensorflow-inference-{sdk_version}-{accelerator}", python, None), uri
    assert "tensorflow_serving" in record.modules and "tensorflow" not in record.packages
    assert record.packages["tensorflow-serving-api" + ("" if accelerator == "cpu" else "-gpu")] == serving
    folder = "" if accelerator == "cpu" else f"{cuda}/"
    (source,) = record.sources
    assert source["file"] == f"tensorflow/inference/docker/{sdk_version}/py3/{folder}Dockerfile.{accelerator}"
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f'"{sdk_version} {commit}' in script


@pytest.mark.parametrize("instance, accelerator", [("ml.m5.large", "cpu"), ("ml.p3.2xlarge", "gpu")])
def test_27s_sagemaker_image_is_read_over_its_ec2_image(instance, accelerator):
    uri = image_uris.retrieve(framework="tensorflow", region="us-east-1", version="2.7", instance_type=instance,
                              image_scope="inference")
    record = catalog.find(uri)
    assert (record.name, record.python, record.eop) == (f"aws-tensorflow-inference-2.7-{accelerator}", "3.8", None)
    assert record.packages["tensorflow-serving-api" + ("" if accelerator == "cpu" else "-gpu")] == "==2.7.0"
    folder = "" if accelerator == "cpu" else "cu112/"
    assert [s["file"] for s in record.sources] == [
        f"tensorflow/inference/docker/2.7/py3/{folder}Dockerfile.{kind}.{accelerator}" for kind in ("sagemaker", "ec2")]


@pytest.mark.parametrize("version", ["2.1", "2.0", "1.15"])
def test_py2_and_py3_builds_under_the_same_tags_have_no_record(version):
    """AWS built py27 and py36/py37 images of these from two Dockerfiles; the SDK's tags name no Python."""
    uri = image_uris.retrieve(framework="tensorflow", region="us-east-1", version=version, instance_type="ml.m5.large",
                              image_scope="inference")
    assert catalog.find(uri) is None
