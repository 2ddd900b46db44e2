"""End of patch (pipeline/images/support.py, support.json from AWS's published data): one line
for an image past it, with the nearest image AWS still patches; one for a newer image."""

from __future__ import annotations

from datetime import date

from pipeline.images import support
from tests import readme_record

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"


def test_an_image_past_its_end_of_patch_is_one_line_with_the_date_and_the_nearest_supported():
    line = support.end_of_patch(f"{ECR}/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker", ["Train"],
                                today=date(2026, 11, 28))
    readme_record.record(line)
    assert line == (f"step Train: the image {ECR}/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker is past "
                    "its end of patch: AWS's end of patch for pytorch-training 2.9 was 2026-10-15, so it gets no "
                    f"security fixes; the nearest image AWS still patches is {ECR}/pytorch-training:2.10-cpu-py313 "
                    "(until 2027-01-21)")
    # The day before it ended: nothing to say.
    assert support.end_of_patch(f"{ECR}/pytorch-training:2.9.0-cpu-py312", ["Train"], today=date(2026, 10, 14)) is None


def test_every_step_on_the_image_is_named_in_its_one_line_and_the_accelerator_is_kept():
    line = support.end_of_patch(f"{ECR}/tensorflow-training:2.14.1-gpu-py310", ["Prep", "Eval"], today=date(2026, 11, 28))
    assert line.startswith("steps Prep, Eval: the image ") and "2024-09-26" in line
    assert line.endswith(f"{ECR}/tensorflow-training:2.21-gpu-py312-sagemaker (until 2027-07-10)")
    line = support.end_of_patch(f"{ECR}/tensorflow-inference:2.14-cpu", ["Serve"], today=date(2026, 11, 28))
    assert line.endswith("names no tensorflow-inference image it still patches")


def test_a_newer_image_than_the_data_knows_is_one_line_and_other_images_none():
    line = support.end_of_patch(f"{ECR}/tensorflow-training:2.99.0-cpu-py313", ["Train"])
    readme_record.record(line)
    assert line.startswith(f"step Train: the image {ECR}/tensorflow-training:2.99.0-cpu-py313 names "
                           "tensorflow-training 2.99, newer than any in trainpipe's copy of AWS's support data")
    assert support.end_of_patch("683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3",
                                ["P"]) is None
    assert support.end_of_patch("111122223333.dkr.ecr.us-east-1.amazonaws.com/mine:2.9-cpu", ["P"]) is None


def test_the_tag_says_repository_version_accelerator_and_python():
    tag = support.parse(f"{ECR}/tensorflow-training:2.4.1-cpu-py37")
    assert (tag.repository, tag.version, tag.accelerator, tag.python) == ("tensorflow-training", (2, 4), "cpu", "3.7")
    assert support.parse(f"{ECR}/pytorch-training:2.10-gpu-py313-cu130-ubuntu22.04-sagemaker-v1").python == "3.13"
    assert support.parse("mine:latest") is None
    cuda = support.parse(f"{ECR}/pytorch:2.13-cu133-amzn2023-sagemaker")
    assert (cuda.repository, cuda.version, cuda.accelerator, cuda.python) == ("pytorch", (2, 13), "gpu", None)
    assert support.end_of_patch(f"{ECR}/pytorch:2.13-cu133-amzn2023-sagemaker", ["T"], today=date(2026, 11, 28)) is None
    assert "2027-07-20" in support.end_of_patch(f"{ECR}/pytorch:2.13-cu133-amzn2023-sagemaker", ["T"],
                                                today=date(2027, 8, 1))



def test_a_sklearn_tag_says_its_build_and_its_python_comes_from_aws_dockerfile(tmp_path):
    """SKLearn's tags (1.2-1-cpu-py3) carry a container build and only py3: read, with the
    Python of that version's Dockerfile, and an unrecorded version is judged against the
    nearest record under that Python (1.4-2 has a record since issue 47: here, a records
    folder holding only 1.2-1's)."""
    import shutil

    from pipeline.images import catalog

    sklearn = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn"
    tag = support.parse(f"{sklearn}:1.4-2-cpu-py3")
    assert (tag.repository, tag.version, tag.build, tag.accelerator, tag.python, tag.version_text) == (
        "sagemaker-scikit-learn", (1, 4), "2", "cpu", "3.10", "1.4-2")
    assert support.parse(f"{sklearn}:1.0-1-cpu-py3").python == "3.8"
    assert support.parse(f"{sklearn}:0.20.0-cpu-py3").python is None  # its Dockerfile names none
    assert catalog.find(f"{sklearn}:1.4-2-cpu-py3").name == "aws-sklearn-1.4-2"
    shutil.copy(catalog.RECORDS_DIR / "aws-sklearn-1.2-1.json", tmp_path)
    record, unchecked = catalog.nearest(f"{sklearn}:1.4-2-cpu-py3", tmp_path)
    assert (record.python, record.name) == ("3.10", "aws-sklearn-1.2-1, the nearest to sagemaker-scikit-learn 1.4-2")
    assert unchecked == (
        "no record of sagemaker-scikit-learn 1.4-2 (pipeline/images/records/): its code is judged against "
        "aws-sklearn-1.2-1 (1.2, the nearest recorded) under Python 3.10 from aws/sagemaker-scikit-learn-container "
        "docker/1.4-2/base/Dockerfile.cpu@ce928c294552042062bd3c4d08ca6ffb17c826a9; what 1.4-2 holds that 1.2 does "
        "not, and every package's version, are not checked")
    assert catalog.nearest(f"{sklearn}:0.20.0-cpu-py3")[0].python == "3.7"  # the nearest record's (0.23-1)
    assert support.end_of_patch(f"{sklearn}:1.4-2-cpu-py3", ["P"]) is None  # not in AWS's DLC support data
