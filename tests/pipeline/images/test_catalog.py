"""The checked-in image records (pipeline/images/records/): well formed, each found by the URI
the SageMaker SDK gives for its image, each fact with its source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sagemaker import image_uris

from pipeline.images import catalog
from pipeline.images.distributions import modules_of, parse_requirements

REPO = Path(__file__).resolve().parents[3]


def test_every_record_is_well_formed_and_names_its_sources():
    records = catalog.records()
    assert len(records) >= 5
    for record in records:
        assert record.modules and record.packages, record.name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", record.retrieved), record.name
        for source in record.sources:
            # AWS's repositories, a package's own metadata on PyPI (what pip installs with it),
            # or this repository's own file (trainpipe's image).
            assert source["url"].startswith(("https://github.com/", "https://pypi.org/project/")) \
                or (REPO / source["url"]).is_file(), source
            assert source["file"] and source["what"]
        assert json.loads(record.path.read_text())["name"] == record.name


@pytest.mark.parametrize("retrieve, name, python", [
    (dict(framework="tensorflow", version="2.14.1", py_version="py310", instance_type="ml.c5.xlarge",
          image_scope="training"), "aws-tensorflow-training-2.14", "3.10"),
    (dict(framework="tensorflow", version="2.14", py_version="py310", instance_type="ml.p3.2xlarge",
          image_scope="training"), "aws-tensorflow-training-2.14", "3.10"),
    (dict(framework="tensorflow", version="2.14", instance_type="ml.m5.large", image_scope="inference"),
     "aws-tensorflow-inference-2.14", "3.10"),
    (dict(framework="sklearn", version="1.2-1", instance_type="ml.m5.xlarge"), "aws-sklearn-1.2-1", "3.9"),
    (dict(framework="sklearn", version="0.23-1", instance_type="ml.m5.xlarge"), "aws-sklearn-0.23-1", "3.7"),
    (dict(framework="pytorch", version="2.2", py_version="py310", instance_type="ml.g5.xlarge",
          image_scope="training"), "aws-pytorch-training-2.2-gpu", "3.10"),
    (dict(framework="pytorch", version="2.2", py_version="py310", instance_type="ml.c5.xlarge",
          image_scope="training"), "aws-pytorch-training-2.2-cpu", "3.10"),
    (dict(framework="pytorch", version="2.8", py_version="py312", instance_type="ml.c5.xlarge",
          image_scope="training"), "aws-pytorch-training-2.8-cpu", "3.12"),
    (dict(framework="pytorch", version="2.8", py_version="py312", instance_type="ml.p4d.24xlarge",
          image_scope="training"), "aws-pytorch-training-2.8-gpu", "3.12"),
    # The newest inference image the SDK names (image_uri_config/pytorch.json: 2.6.0, py312).
    (dict(framework="pytorch", version="2.6", py_version="py312", instance_type="ml.m5.large",
          image_scope="inference"), "aws-pytorch-inference-2.6-cpu", "3.12"),
    (dict(framework="pytorch", version="2.6", py_version="py312", instance_type="ml.g5.xlarge",
          image_scope="inference"), "aws-pytorch-inference-2.6-gpu", "3.12"),
])
def test_the_sdks_image_uri_finds_its_record(retrieve, name, python):
    for region in ("us-east-1", "eu-west-1"):
        uri = image_uris.retrieve(region=region, **retrieve)
        record = catalog.find(uri)
        assert record is not None and (record.name, record.python) == (name, python), uri


def test_the_tensorflow_214_training_image_ships_no_horovod():
    record = catalog.find("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14.1-gpu-py310-cu118-ubuntu20.04-sagemaker")
    assert "horovod" not in record.modules and not any("horovod" in p.lower() for p in record.packages)
    assert {"tensorflow", "numpy", "pandas", "sklearn", "mpi4py", "sagemaker_tensorflow"} <= record.modules
    assert any("Horovod" in s["what"] for s in record.sources)


def test_an_image_without_a_record_is_none():
    assert catalog.find("123456789012.dkr.ecr.us-east-1.amazonaws.com/my-own:latest") is None
    assert catalog.find("") is None


def test_a_malformed_record_names_the_field():
    with pytest.raises(catalog.RecordError, match="python must be MAJOR.MINOR"):
        catalog.parse({"name": "x", "uri_patterns": [], "python": "3", "packages": {}, "modules": [],
                       "sources": [{"url": "u"}], "retrieved": "2026-01-01"})
    with pytest.raises(catalog.RecordError, match="missing sources"):
        catalog.parse({"name": "x", "uri_patterns": [], "python": "3.9", "packages": {}, "modules": [],
                       "retrieved": "2026-01-01"})


@pytest.mark.parametrize("distribution, module", [
    ("scikit-learn", "sklearn"), ("Pillow", "PIL"), ("PyYAML", "yaml"), ("opencv-python", "cv2"),
    ("protobuf", "google"), ("python-dateutil", "dateutil"), ("tf-models-official", "official")])
def test_a_distribution_maps_to_the_modules_it_installs(distribution, module):
    assert module in modules_of(distribution).modules


def test_a_requirements_file_gives_its_modules_and_says_what_it_only_guessed():
    wanted = parse_requirements("# comment\n--index-url https://x\nscikit-learn==1.2.1\nPillow>=9 ; python_version>'3'\n"
                                "some-unheard-of-thing\n-e .\n")
    assert {"sklearn", "PIL"} <= wanted.modules
    assert wanted.guessed == ("some-unheard-of-thing",) and "some_unheard_of_thing" in wanted.modules
    assert wanted.opaque == ("-e .",)


def test_a_record_built_from_another_holds_its_modules_too(tmp_path):
    base = {"name": "base", "uri_patterns": ["/base:"], "python": "3.10", "packages": {"numpy": "1.26.4"},
            "modules": ["numpy"], "sources": [{"url": "https://github.com/aws/x"}], "retrieved": "2026-11-27"}
    child = {**base, "name": "child", "uri_patterns": ["/child:"], "packages": {"horovod": "0.28.1"},
             "modules": ["horovod"], "extends": "base"}
    (tmp_path / "a-base.json").write_text(json.dumps(base))
    (tmp_path / "b-child.json").write_text(json.dumps(child))
    record = catalog.find("x/child:1", tmp_path)
    assert record.modules == {"numpy", "horovod"} and record.packages == {"numpy": "1.26.4", "horovod": "0.28.1"}
    (tmp_path / "b-child.json").write_text(json.dumps({**child, "extends": "nothing"}))
    catalog.records.cache_clear()
    with pytest.raises(catalog.RecordError, match="extends 'nothing', which is not a record here"):
        catalog.find("x/child:1", tmp_path)
    catalog.records.cache_clear()
