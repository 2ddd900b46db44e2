"""A job's imports against its image (pipeline/images/imports.py), read from the code alone."""

from __future__ import annotations

import pytest

from pipeline.images.imports import check_code, scan, stdlib
from tests import readme_record

TF = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14.1-cpu-py310-ubuntu20.04-sagemaker"
SKLEARN = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"


def verdict(files, image=TF, requirements=None, entry=("train.py",)):
    return check_code(files, image, requirements, step="Train", entry_points=list(entry) if entry else None)


def test_what_the_image_has_passes_and_what_it_lacks_is_one_line_naming_module_step_image_and_ways_out():
    assert verdict({"train.py": "import numpy, tensorflow as tf\nfrom sklearn import svm\n"}).refusal is None
    refused = verdict({"train.py": "import os\nimport horovod.tensorflow.keras as hvd\n"}).refusal
    readme_record.record(refused)
    assert "\n" not in refused
    assert refused.startswith("step Train: the code imports horovod (train.py:2), which the image " + TF)
    assert "record aws-tensorflow-training-2.14" in refused and "requirements.txt" in refused
    assert "trainpipe's own Horovod training image" in refused


def test_the_requirements_txt_and_the_codes_own_pip_install_count():
    files = {"train.py": "import lightgbm\n"}
    assert verdict(files, requirements="lightgbm==4.1\n").refusal is None
    installs = ('import subprocess, sys\nsubprocess.check_call([sys.executable, "-m", "pip", "install", '
                '"lightgbm==4.1"])\nimport lightgbm\n')
    assert verdict({"train.py": installs}).refusal is None


def test_a_requirement_whose_modules_are_unknown_warns_instead_of_refusing():
    result = verdict({"train.py": "import fancy_module\n"}, requirements="some-unheard-of-thing\n")
    assert result.refusal is None and "some-unheard-of-thing may install them" in result.warning


def test_optional_type_only_local_and_relative_imports_are_not_counted():
    files = {
        "train.py": ("try:\n    import google_crc32c\nexcept ImportError:\n    google_crc32c = None\n"
                     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mypy_extensions\n"
                     "import helpers\nfrom pkg import thing\n"),
        "helpers.py": "from . import nothing\n",
        "pkg/__init__.py": "", "pkg/thing.py": "import numpy\n",
    }
    assert verdict(files).refusal is None


def test_the_local_modules_the_entry_point_reaches_are_read_and_the_others_are_not():
    files = {"train.py": "from pkg import model\n", "pkg/__init__.py": "", "pkg/model.py": "import torch\n",
             "unused.py": "import lightgbm\n"}
    refused = verdict(files).refusal
    assert "torch (pkg/model.py:1)" in refused and "lightgbm" not in refused
    # no entry point known (a shell command): every file is read
    assert "lightgbm (unused.py:1)" in verdict(files, entry=None).refusal


def test_the_standard_library_is_the_images_python_s():
    assert "tomllib" not in stdlib("3.10") and "tomllib" in stdlib("3.11")
    assert "distutils" in stdlib("3.10") and "distutils" not in stdlib("3.12")
    refused = verdict({"train.py": "import tomllib\n"}).refusal  # the image's Python is 3.10
    assert "tomllib (train.py:1)" in refused


@pytest.mark.parametrize("code, python", [
    ("match x:\n    case 1:\n        pass\n", "3.9"),
    ("with (open('a') as a, open('b') as b):\n    pass\n", "3.8"),
])
def test_syntax_newer_than_the_images_python_is_found(code, python):
    assert scan({"train.py": code}, ["train.py"], python).syntax_errors
    assert not scan({"train.py": code}, ["train.py"], "3.11").syntax_errors


def test_syntax_newer_than_this_python_is_not_held_against_a_newer_image():
    # PEP 695 (3.12): this machine's Python (3.11) cannot judge it; the image's may parse it.
    assert not scan({"train.py": "type Point = tuple[float, float]\n"}, ["train.py"], "3.12").syntax_errors


def test_code_the_image_cannot_parse_is_refused_in_one_line():
    refused = verdict({"train.py": "match 1:\n    case 1:\n        pass\n"}, image=SKLEARN).refusal
    assert refused.startswith("step Train: train.py:")
    assert "has Python 3.9, which cannot parse this code" in refused and "\n" not in refused


def test_an_image_without_a_record_is_one_warning():
    result = verdict({"train.py": "import anything\n"}, image="123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1")
    readme_record.record(result.warning)
    assert result.refusal is None and result.warning.startswith("step Train: no record of what the image ")


def test_a_texts_facts_are_kept_on_disk_for_later_runs_and_a_damaged_entry_is_read_again(tmp_path, monkeypatch):
    from pipeline.images import imports

    monkeypatch.setattr(imports, "_disk_cache", lambda: tmp_path)
    monkeypatch.setattr(imports, "_READ_CACHE", {})
    files = {"train.py": "import pandas\nimport helper\nfrom . import x\nimport subprocess\n"
                         "subprocess.check_call(['pip', 'install', 'boto3'])\n",
             "helper.py": "def f(:\n"}
    first = scan(files, ["train.py", "helper.py"], "3.10")
    (stored,) = [p for p in tmp_path.rglob("*.json") if "3.10" in p.name and "import pandas" not in p.read_text()
                 and '"pip_installs": ["boto3"]' in p.read_text()]
    imports._READ_CACHE.clear()  # a later run: a new process, the same texts
    monkeypatch.setattr(imports, "_parse", lambda *a: pytest.fail("parsed again"))
    later = scan(files, ["train.py", "helper.py"], "3.10")
    assert later == first
    assert first.imports == {"pandas": "train.py:1", "subprocess": "train.py:4"} and first.pip_installs == ["boto3"]
    assert first.syntax_errors == ["helper.py:1: invalid syntax"]
    stored.write_text("{not json")  # damaged: parsed again, and rewritten
    monkeypatch.undo()
    monkeypatch.setattr(imports, "_disk_cache", lambda: tmp_path)
    monkeypatch.setattr(imports, "_READ_CACHE", {})
    assert scan(files, ["train.py", "helper.py"], "3.10") == first
    assert '"pip_installs": ["boto3"]' in stored.read_text()


def test_optional_imports_follow_what_the_code_does():
    """find_spec branches, suppress(ImportError), and sys.version_info branches under the
    image's Python (3.10 here): none is a reason to refuse (issue 47)."""
    files = {"train.py": (
        "import sys\nfrom contextlib import suppress\nfrom importlib.util import find_spec\nimport importlib\n"
        "if find_spec('wandb') is not None:\n    import wandb\n"
        "if importlib.util.find_spec('comet_ml'):\n    import comet_ml\nelse:\n    comet_ml = None\n"
        "with suppress(ImportError):\n    import neptune\n"
        "if sys.version_info >= (3, 11):\n    import tomllib\nelse:\n    import yaml as tomllib\n"
        "if sys.version_info[:2] < (3, 8):\n    import importlib_metadata\n")}
    assert verdict(files).refusal is None
    # What the image's Python does run is still judged: 3.10 takes the else branch.
    refused = verdict({"train.py": "import sys\nif sys.version_info < (3, 11):\n    import tomli\n"}).refusal
    assert "tomli (train.py:3)" in refused and "tomllib" not in refused
    # A find_spec of one module does not make another optional.
    refused = verdict({"train.py": "from importlib.util import find_spec\nif find_spec('wandb'):\n    import optuna\n"}).refusal
    assert "optuna (train.py:3)" in refused


def test_the_sys_executable_pip_idiom_installs_what_it_names_and_only_that():
    idiom = ('import subprocess, sys\nsubprocess.check_call([sys.executable, "-m", "pip", "install", '
             '"lightgbm==4.1"])\n')
    assert verdict({"train.py": idiom + "import lightgbm\n"}).refusal is None
    # Not a licence for anything else, even in a branch that never runs (issue 47, item 4).
    refused = verdict({"train.py": "import sys\nif sys.version_info < (3, 8):\n    " + idiom.replace("\n", "\n    ")
                       + "\nimport optuna\nimport mlflow\n"}).refusal
    assert "mlflow (train.py:" in refused and "optuna (train.py:" in refused
    # A package list built at run time is still unknown: a warning, not a refusal.
    built = 'import subprocess, sys\npkgs = ["x"]\nsubprocess.check_call([sys.executable, "-m", "pip", "install", *pkgs])\nimport optuna\n'
    result = verdict({"train.py": built})
    assert result.refusal is None and "may install them" in result.warning


def test_import_module_with_a_constant_name_is_an_import():
    refused = verdict({"train.py": "import pandas\nfrom importlib import import_module\npa = import_module('pyarrow')\n"}).refusal
    assert "pyarrow (train.py:3)" in refused


def test_what_the_pinned_packages_pull_in_is_in_the_tf_214_record():
    # tf-models-official 2.14.2 requires matplotlib, gin-config, sentencepiece, tf-slim; scikit-learn joblib.
    assert verdict({"train.py": "import matplotlib.pyplot\nimport gin\nimport sentencepiece\nimport tf_slim\n"
                                "import joblib\n"}).refusal is None


def test_an_aws_image_with_no_record_is_judged_by_its_tag_against_the_nearest_record_in_one_line():
    # AWS built no TensorFlow 2.15 training image (the SDK's tensorflow.json goes from 2.14.1 to 2.16.2):
    # 2.14 and 2.16 are as near, the older by name.
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.15.0-cpu-py310"
    result = verdict({"train.py": "import tensorflow as tf\nimport pandas\n"}, image=image)
    readme_record.record(result.warning)
    assert result.refusal is None and result.warning == (
        "step Train: no record of tensorflow-training 2.15 (pipeline/images/records/): its code is judged against "
        "aws-tensorflow-training-2.14 (2.14, the nearest recorded) under Python 3.10 from its tag; what 2.15 holds "
        "that 2.14 does not, and every package's version, are not checked")
    # The tag's Python decides the standard library: tomllib is not in 3.10's.
    assert "tomllib (train.py:1)" in verdict({"train.py": "import tomllib\n"}, image=image).refusal


@pytest.mark.parametrize("planted", ["writable by others", "another user's"])
def test_a_cache_entry_someone_else_could_have_planted_is_not_believed(tmp_path, monkeypatch, planted):
    """An entry saying a file imports nothing, planted in a shared cache: the file is read
    again, and its import of a module the image lacks is still found."""
    import hashlib
    import json
    import os

    from pipeline.images import imports

    monkeypatch.setattr(imports, "_disk_cache", lambda: tmp_path)
    monkeypatch.setattr(imports, "_READ_CACHE", {})
    text = "import not_a_module_anywhere\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    entry = tmp_path / digest[:2] / f"{digest}-3.10.json"
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"imports": [], "follow": [], "pip_installs": [], "pip_opaque": False,
                                 "syntax_error": None, "parsed": True}))
    if planted == "writable by others":
        entry.chmod(0o666)
    else:
        if os.geteuid() != 0:
            pytest.skip("only root can make a file another user's")
        os.chown(entry, 65534, 65534)
    assert scan({"train.py": text}, ["train.py"], "3.10").imports == {"not_a_module_anywhere": "train.py:1"}
