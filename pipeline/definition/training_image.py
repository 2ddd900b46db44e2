"""trainpipe's own training image: AWS's TensorFlow 2.14 training image plus Horovod
(``infra/training-image/Dockerfile``), and the URI the definition's training step names.

AWS's TensorFlow training images stopped shipping Horovod after 2.12, and
``training_entry/train.py`` imports it, so the training step cannot run on the stock image
(docs/sagemaker.md, "The training image"). This module is the one source of the image's
facts: the Horovod version, the AWS base image for a device (``image_uris``, as every other
step's image), the build arguments, and the tag. The tag is content-addressed::

    <the base image's tag>-horovod<version>-<first 12 hex of sha256(Dockerfile)>
    2.14.1-gpu-py310-cu118-ubuntu20.04-sagemaker-horovod0.28.1-0123456789ab

so a changed Dockerfile is a new tag (the ECR repository's tags are immutable), a definition
always names the image its own Dockerfile builds, and the base's ``py310`` stays in the tag
for the local runner's image-Python lookup. The repository is the infra stack's
(``TrainingImageRepositoryUri`` output, ``--training-image-repository``).

The CI workflow asks this module for the build arguments and the tag::

    python -m pipeline.definition.training_image --region us-east-1 --device gpu
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from sagemaker import image_uris

# Horovod: the version scripts/install.sh builds locally (tests hold the two together).
HOROVOD_VERSION = "0.28.1"
DOCKERFILE = Path(__file__).resolve().parents[2] / "infra" / "training-image" / "Dockerfile"
DEVICES = ("cpu", "gpu")
# An instance type image_uris maps to each device's base image.
_DEVICE_INSTANCE = {"cpu": "ml.c5.2xlarge", "gpu": "ml.p3.2xlarge"}


def dockerfile_digest(dockerfile: Path = DOCKERFILE) -> str:
    try:
        content = dockerfile.read_bytes()
    except OSError as error:
        # Only a trainpipe installed without its repository gets here.
        raise RuntimeError(f"{dockerfile}: {error.strerror}; the training image's tag is the "
                           "hash of this file: install trainpipe from its repository") from None
    return hashlib.sha256(content).hexdigest()[:12]


def base_image(region: str, instance_type: str, framework_version: str, py_version: str) -> str:
    """AWS's TensorFlow training image for ``instance_type`` (its CPU or GPU variant)."""
    return image_uris.retrieve(framework="tensorflow", region=region, version=framework_version,
                               py_version=py_version, instance_type=instance_type,
                               image_scope="training")


@dataclass(frozen=True)
class TrainingImage:
    base: str  # the AWS image it is built FROM
    repository: str  # <account>.dkr.ecr.<region>.amazonaws.com/<name>

    @property
    def device(self) -> str:
        return "gpu" if "-gpu-" in self.base_tag else "cpu"

    @property
    def base_tag(self) -> str:
        return self.base.rsplit(":", 1)[1]

    @property
    def tag(self) -> str:
        return f"{self.base_tag}-horovod{HOROVOD_VERSION}-{dockerfile_digest()}"

    @property
    def uri(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def build_args(self) -> dict[str, str]:
        """The Dockerfile's ARGs (``docker build --build-arg``)."""
        return {"BASE_IMAGE": self.base, "HOROVOD_VERSION": HOROVOD_VERSION}


def main(argv: list[str] | None = None) -> int:
    from pipeline.settings import FRAMEWORK_VERSION, PY_VERSION

    parser = argparse.ArgumentParser(
        prog="python -m pipeline.definition.training_image",
        description="Print the training image's build arguments and tag as KEY=VALUE lines "
                    "(for $GITHUB_OUTPUT).")
    parser.add_argument("--region", required=True)
    parser.add_argument("--device", required=True, choices=DEVICES)
    args = parser.parse_args(argv)
    base = base_image(args.region, _DEVICE_INSTANCE[args.device], FRAMEWORK_VERSION, PY_VERSION)
    image = TrainingImage(base, repository="")
    for key, value in (*image.build_args.items(), ("TAG", image.tag)):
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
