"""The training step names trainpipe's own image (AWS's TF 2.14 plus Horovod), built from
infra/training-image/Dockerfile, whose facts come from pipeline/definition/training_image.py."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pipeline.definition import parameters as P
from pipeline.definition import training_image as T
from pipeline.definition.build import STEP_TRAIN, build_definition
from pipeline.settings import Settings
from tests.moto_aws import REPO_ROOT

REPOSITORY = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/trainpipe-trainingimagerepository-abc"


def training_image_of(definition: dict) -> str:
    (train,) = [s for s in definition["Steps"] if s["Name"] == STEP_TRAIN]
    return train["Arguments"]["AlgorithmSpecification"]["TrainingImage"]


def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", T.DOCKERFILE.read_text(), re.MULTILINE))


@pytest.fixture(scope="module")
def definitions():
    settings = Settings(region="eu-west-1", training_image_repository=REPOSITORY)
    return {device: build_definition(settings, parameter_overrides={P.TRAINING_INSTANCE_TYPE: itype})
            for device, itype in (("cpu", "ml.c5.2xlarge"), ("gpu", "ml.p3.8xlarge"))}


def test_the_training_step_names_our_image_in_the_stacks_repository(definitions):
    for device, definition in definitions.items():
        uri = training_image_of(definition)
        repository, tag = uri.rsplit(":", 1)
        assert repository == REPOSITORY
        # AWS's tag for the device, then Horovod's version and the Dockerfile's hash.
        assert re.fullmatch(rf"2\.14\.1-{device}-py310(-cu\d+)?-horovod0\.28\.1-[0-9a-f]{{12}}", tag), tag
        assert tag.endswith(T.dockerfile_digest())


def test_without_the_stack_the_definition_names_the_placeholder_accounts_repository():
    uri = training_image_of(build_definition(Settings(region="eu-west-1")))
    assert uri.startswith("111122223333.dkr.ecr.eu-west-1.amazonaws.com/trainpipe-training:2.14.1-cpu-py310-horovod")


def test_a_changed_dockerfile_is_a_new_tag(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(T.DOCKERFILE.read_text())
    same = T.dockerfile_digest(dockerfile)
    dockerfile.write_text(T.DOCKERFILE.read_text() + "\n# a comment\n")
    assert same == T.dockerfile_digest() != T.dockerfile_digest(dockerfile)


def test_one_horovod_version_in_the_dockerfile_the_module_and_the_local_install():
    install = (REPO_ROOT / "scripts" / "install.sh").read_text()
    assert re.search(r"^horovod_version=(\S+)$", install, re.MULTILINE).group(1) == T.HOROVOD_VERSION
    args = dockerfile_args()
    assert args["HOROVOD_VERSION"] == T.HOROVOD_VERSION
    # The Dockerfile's default base is AWS's GPU training image of our framework version.
    assert re.fullmatch(r"763104351884\.dkr\.ecr\.us-east-1\.amazonaws\.com/tensorflow-training:"
                        r"2\.14\.1-gpu-py310-cu118-ubuntu20\.04-sagemaker", args["BASE_IMAGE"])


def test_the_dockerfile_builds_horovod_with_tensorflow_mpi_and_on_gpu_nccl():
    text = T.DOCKERFILE.read_text()
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.MULTILINE)
    build = text[text.index("RUN if [ -d /usr/local/cuda ]"):]
    for variable in ("HOROVOD_GPU_OPERATIONS=NCCL", "HOROVOD_WITH_TENSORFLOW=1", "HOROVOD_WITH_MPI=1",
                     "HOROVOD_WITHOUT_PYTORCH=1", "--no-build-isolation", '"horovod==${HOROVOD_VERSION}"'):
        assert variable in build, variable


def test_the_workflow_gets_build_arguments_and_tag_from_the_module():
    """What CI's training-image job runs, as a process."""
    done = subprocess.run([sys.executable, "-m", "pipeline.definition.training_image",
                           "--region", "eu-west-1", "--device", "gpu"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True)
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert set(lines) == {"BASE_IMAGE", "HOROVOD_VERSION", "TAG"}
    assert lines["BASE_IMAGE"].startswith("763104351884.dkr.ecr.eu-west-1.amazonaws.com/tensorflow-training:2.14.1-gpu-py310")
    assert lines["HOROVOD_VERSION"] == T.HOROVOD_VERSION
    assert lines["TAG"] == T.TrainingImage(lines["BASE_IMAGE"], REPOSITORY).tag
    assert lines["TAG"].startswith(lines["BASE_IMAGE"].rsplit(":", 1)[1] + "-horovod")


def test_the_module_refuses_an_unknown_device_in_one_line():
    done = subprocess.run([sys.executable, "-m", "pipeline.definition.training_image",
                           "--region", "eu-west-1", "--device", "tpu"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice: 'tpu'" in done.stderr


def test_the_repository_comes_from_the_flag_or_the_variable_of_trainpipe_definition(tmp_path):
    """As a user gives it without a stack: the command, as a process."""
    import json
    import os

    flag_out, env_out = tmp_path / "flag.json", tmp_path / "env.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPIPE_")}
    subprocess.run([sys.executable, "-m", "pipeline", "definition", "-o", str(flag_out), "--region", "eu-west-1",
                    "--training-image-repository", REPOSITORY], cwd=REPO_ROOT, env=env, check=True,
                   capture_output=True, timeout=300)
    subprocess.run([sys.executable, "-m", "pipeline", "definition", "-o", str(env_out), "--region", "eu-west-1"],
                   cwd=REPO_ROOT, env={**env, "TRAINPIPE_TRAINING_IMAGE_REPOSITORY": REPOSITORY}, check=True,
                   capture_output=True, timeout=300)
    for out in (flag_out, env_out):
        uri = training_image_of(json.loads(out.read_text()))
        assert uri.startswith(REPOSITORY + ":2.14.1-cpu-py310-horovod0.28.1-"), uri
