"""Records of AWS's SKLearn 1.0-1 and 1.4-2 images (issue 47), made by tools/image_records.py (the
commands in tools/image_records_make.sh) from aws/sagemaker-scikit-learn-container at each version's
branch head: the base Dockerfile's installs, then requirements.txt, which the final image installs last."""

from __future__ import annotations

import pytest

from pipeline.images import catalog
from pipeline.images.imports import check_code

SKLEARN = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn"


@pytest.mark.parametrize("version, commit, python, pins", [
    ("1.0-1", "117925d1d4ee65b1595355c742f3c0d140c046a9", "3.8",
     {"scikit-learn": "==1.0.2", "pandas": "==1.1.3", "numpy": "==1.24.1", "pyarrow": "==14.0.1"}),
    ("1.4-2", "6c5704d20eabcd1561e9cb938671c92e79c32310", "3.10",
     {"scikit-learn": "==1.4.2", "pandas": "==2.3.2", "numpy": "==2.1.0", "pyarrow": "==17.0.0"}),
])
def test_each_version_finds_its_record_with_its_pins_and_sources(version, commit, python, pins):
    record = catalog.find(f"{SKLEARN}:{version}-cpu-py3")
    assert record is not None and (record.name, record.python) == (f"aws-sklearn-{version}", python)
    assert {k: record.packages[k] for k in pins} == pins
    assert {"sklearn", "joblib", "threadpoolctl", "pandas", "pytz", "flask", "gevent"} <= record.modules
    files = {s["file"]: s for s in record.sources if "sagemaker-scikit-learn-container" in s["url"]}
    assert set(files) == {f"docker/{version}/base/Dockerfile.cpu", "requirements.txt"}
    for source in files.values():
        assert source["url"].endswith(f"/{source['commit']}/{source['file']}") and source["date"] <= record.retrieved
    script = (catalog.RECORDS_DIR.parents[2] / "tools" / "image_records_make.sh").read_text()
    assert f"sk_record {version} {commit}" in script


def test_the_py312_build_of_14_2_is_not_the_py3_record():
    assert catalog.find(f"{SKLEARN}:1.4-2-cpu-py312") is None


def test_root_mean_squared_error_code_passes_on_14_2_and_lightgbm_is_refused():
    image = f"{SKLEARN}:1.4-2-cpu-py3"
    ok = {"p.py": "import joblib\nimport pandas as pd\nfrom sklearn.metrics import root_mean_squared_error\n"}
    assert check_code(ok, image, None, step="P", entry_points=["p.py"]).refusal is None
    refused = check_code({"p.py": "import lightgbm\n"}, image, None, step="P", entry_points=["p.py"]).refusal
    assert "(Python 3.10, record aws-sklearn-1.4-2) does not have" in refused
