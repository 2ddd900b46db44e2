"""Records of AWS's PyTorch inference images 1.6 to 2.5 (issue 47), CPU and GPU, made by
tools/image_records.py (tools/image_records_make.sh) from each version's Dockerfile (its sagemaker
stage) at the commit before the one that deleted its folder; end of patch from AWS's support table's
PyTorch row where it has one."""

from __future__ import annotations

import pytest
from sagemaker import image_uris

from pipeline.images import catalog

VERSIONS = {  # version: (commit, Python, torch on CPU, torchserve, end of patch)
    "2.5": ("a15f2f0209bde8f4cd7ba8ca45cf5fce694457ec", "3.11", "==2.5.1+cpu", "==0.12.0", "2025-10-29"),
    "2.4": ("35dbb5bc7b29e074c81a392cdf86c8e52ccec9d6", "3.11", "==2.4.0+cpu", "==0.12.0", "2025-07-24"),
    "2.3": ("df83469a1da84aa2d247ec98445b0caac009ced7", "3.11", "==2.3.0+cpu", "==0.11.0", "2025-04-24"),
    "2.2": ("7b7d5294e8ed0041b185de6001198f896bee5eff", "3.10", "==2.2.0+cpu", "==0.11.0", "2025-01-30"),
    "2.1": ("6fc2aa90e4e83cdd4b49d7548d2f2a7673895045", "3.10", "==2.1.0+cpu", "==0.11.0", "2024-10-04"),
    # 2.0: torchserve is the build arg TORCHSERVE_VERSION, from its buildspec (no core_packages.json).
    "2.0": ("8cb4488d0bc388b96d732df60c6cae11be85475f", "3.10", "==2.0.1+cpu", "==0.8.2", "2024-03-15"),
    "1.13": ("053a25181f7eee76dee1ee19b6ba09a77611df12", "3.9", "==1.13.1+cpu", "==0.11.0", "2024-10-28"),
    "1.12": ("8c4c8281e120991ccf527c5541ebe93b18f4eb34", "3.8", "==1.12.1+cpu", "==0.6.1", None),
    "1.11": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.11.0+cpu", "==0.6.0", None),
    # 1.10: the SageMaker Dockerfile over the EC2 one, which installs torchserve-nightly.
    "1.10": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.10.2+cpu", None, None),
    "1.9": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.8", "==1.9.1", "==0.6.0", None),
    "1.8": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.6", "==1.8.1", "==0.4.0", None),
    "1.7": ("37df056d4c0cb482b4369b017c0687e07ef1e0c0", "3.6", "==1.7.1", "==0.3.1", None),
    "1.6": ("58a21e4b6915f2d4584abf417e63e3920bf97a48", "3.6", "==1.6.0", "==0.3.1", None),
}


@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_finds_its_record(version):
    commit, python, torch, torchserve, eop = VERSIONS[version]
    for accelerator in ("cpu", "gpu"):
        py = "py" + python.replace(".", "")
        record = catalog.find(f"763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:{version}.0-{accelerator}-{py}")
        assert record is not None and (record.name, record.python, record.eop) == (
            f"aws-pytorch-inference-{version}-{accelerator}", python, eop)
        assert {"torch", "ts"} <= record.modules and record.packages.get("torchserve") == torchserve
        for source in record.sources:
            if "deep-learning-containers" in source["url"]:
                assert source["url"].endswith(f"/{source['commit']}/{source['file']}")
    assert catalog.find(f"763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:{version}.0-cpu-{py}") \
        .packages["torch"] == torch
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f'"{version} {commit}' in script
    if version == "2.0":
        assert record.packages["sagemaker-pytorch-inference"] == "==2.0.16"
        assert any(s["file"] == "pytorch/inference/buildspec-2-0-sm.yml" for s in record.sources)
    if version == "1.10":
        assert record.packages["torchserve-nightly"] == "==2022.3.23.post2"
        assert any(s["file"].endswith("Dockerfile.ec2.gpu") for s in record.sources)


@pytest.mark.parametrize("version, py, name", [("2.1", "py310", "aws-pytorch-inference-2.1-cpu"),
                                               ("1.13", "py39", "aws-pytorch-inference-1.13-cpu"),
                                               ("2.5", "py311", "aws-pytorch-inference-2.5-cpu")])
def test_the_sdks_inference_uri_finds_its_record(version, py, name):
    uri = image_uris.retrieve(framework="pytorch", region="us-east-1", version=version, py_version=py,
                              instance_type="ml.m5.large", image_scope="inference")
    assert catalog.find(uri).name == name, uri
