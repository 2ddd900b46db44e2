"""Records of AWS's XGBoost framework images (sagemaker-xgboost 0.90-1 to 3.0-5, issue 47), made by
tools/image_records.py (the commands in tools/image_records_make.sh) from aws/sagemaker-xgboost-container
at each version's branch head: the base Dockerfile's installs, then requirements.txt."""

from __future__ import annotations

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

XGB = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost"
VERSIONS = {  # the SDK's tag for the version: (commit, Python, xgboost)
    "3.0-5": ("cb8df91cd44c7b01c53ccf321fd3fdf3eb78adae", "3.10", "==3.0.5"),
    "1.7-1": ("f7a93a21e50e44b4077f0889a7f676cad8c226f3", "3.9", "==1.7.4"),
    "1.5-1": ("4eef773aab5c9e38a9ba945c8ad31c24d764d44a", "3.8", "==1.5.2"),
    "1.3-1": ("07ece4c7b4984690560406ec66a68176820ee921", "3.7", "==1.3.3"),
    "1.2-2": ("dd637a025b8e644ab356a182fab4cd628b123b97", "3.7", "==1.2.0"),
    "1.2-1": ("0d8f55de0bec7e7afe29923b217714a592ff5d77", "3.7", "==1.2.0"),
    "1.0-1-cpu-py3": ("0c7a3b8942f8cd75ea1c9e3c32bb83ea4b69b0a5", "3.7", "==1.0.0"),
    "0.90-2-cpu-py3": ("a034e4b46392a65034316106b039422c93c5d909", "3.6", "==0.90"),
    "0.90-1-cpu-py3": ("132188b309ef27b17ee9a769a0bdbbe8ddb802ee", "3.7", "==0.90"),
}


@pytest.mark.parametrize("tag", VERSIONS)
def test_each_tag_the_sdk_names_finds_its_record(tag):
    commit, python, xgboost = VERSIONS[tag]
    version = tag.removesuffix("-cpu-py3")
    record = catalog.find(f"{XGB}:{tag}")
    assert record is not None and (record.name, record.python) == (f"aws-xgboost-{version}", python)
    assert record.packages["xgboost"] == xgboost and {"xgboost", "sklearn", "pandas", "numpy"} <= record.modules
    files = {s["file"]: s for s in record.sources}
    assert set(files) == {f"docker/{version}/base/Dockerfile.cpu", "requirements.txt"}
    for source in files.values():
        assert source["url"] == f"https://github.com/aws/sagemaker-xgboost-container/blob/{source['commit']}/{source['file']}"
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f"xgb_record {version} {commit}" in script


def test_0_90_2s_python_is_the_one_its_dockerfile_conda_installs():
    """0.90-2's Dockerfile has no ARG PYTHON_VERSION and the SDK's image_uri_config says only py3:
    the base Dockerfile's ``conda install -c conda-forge python=3.6.13`` names it."""
    from sagemaker import image_uris

    uri = image_uris.retrieve("xgboost", "us-east-1", "0.90-2")
    record = catalog.find(uri)
    assert uri.endswith(":0.90-2-cpu-py3") and record.name == "aws-xgboost-0.90-2" and record.python == "3.6"
    (dockerfile,) = [s for s in record.sources if s["file"].endswith("Dockerfile.cpu")]
    assert "; conda install -c conda-forge python=3.6.13 (Python 3.6);" in dockerfile["what"]


def test_a_later_build_is_not_the_records():
    assert catalog.find(f"{XGB}:1.7-1-1") is None  # the Python upgrade of 1.7-1: no record


def test_a_framework_script_on_17_is_checked():
    image = f"{XGB}:1.7-1"
    code = {"train.py": "import xgboost as xgb\nimport pandas as pd\nfrom sklearn.metrics import f1_score\n"}
    assert check_code(code, image, None, step="Train", entry_points=["train.py"]).refusal is None
    refused = check_code({"train.py": "import xgboost\nimport lightgbm\n"}, image, None, step="Train",
                         entry_points=["train.py"]).refusal
    assert "(Python 3.9, record aws-xgboost-1.7-1) does not have" in refused
