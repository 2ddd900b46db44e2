"""What a SageMaker training job spends before its script's first step, on every host, billed:
pulling the training image, and (the alternative trainpipe did not choose) building Horovod.

SageMaker bills from ``TrainingStartTime`` to ``TrainingEndTime``, and "the start time in
CloudWatch Logs might be later than this time. The difference is due to the time it takes to
download the training data and to the size of the training container" (DescribeTrainingJob,
``TrainingStartTime``). So the image's pull is billed on every host of every job.

Two ways to give the training step Horovod, which AWS's TF 2.14 images lack (docs/sagemaker.md):

- ``OWN_IMAGE`` (chosen): trainpipe's image, AWS's plus a Horovod layer
  (infra/training-image/Dockerfile). A job pulls the base image and the layer.
- ``BUILD_AT_START``: AWS's image, and Horovod built from source when the job starts (a
  ``requirements.txt`` line; the toolkit pip-installs it before the script). A job pulls the
  base image, then compiles Horovod on every host, every job; and with network isolation (the
  pipeline's default, required by the stack's execution role) pip cannot reach PyPI at all, so
  the source and its build tools would have to travel in the code channel.

Every figure below has its source beside it. ``trainpipe advise`` adds ``OWN_IMAGE``'s seconds
to every SageMaker job it predicts (``seconds_for``); the local runner pulls nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024

# AWS's TF 2.14 SageMaker training images, uncompressed (MiB): the image_size_baseline of
# aws/deep-learning-containers tensorflow/training/buildspec-2-14-sm.yml at 2784cf6ae7
# (BuildTensorflowSageMakerGpuPy310Cu118TrainingDockerImage, ...CpuPy310...). src/image.py
# there compares it with `docker inspect`'s Size / 2^20 and fails a build above 1.2x.
BASE_IMAGE_MIB = {"gpu": 11998, "cpu": 7500}
BASE_IMAGE_SOURCE = ("aws/deep-learning-containers@2784cf6ae7 tensorflow/training/buildspec-2-14-sm.yml "
                     "image_size_baseline (uncompressed MiB, src/image.py)")

# The Horovod layer: the installed size of horovod 0.28.1 (TF + MPI + Gloo, CPU) that
# scripts/install.sh built on this machine: `du -sb .venv/lib/python3.11/site-packages/horovod`
# = 63,934,119 bytes (its wheel: 17,504,917). The GPU build adds the NCCL operations (linked to
# the image's own libnccl, HOROVOD_NCCL_LINK=SHARED); not measured here (no CUDA).
HOROVOD_LAYER_MIB = 63_934_119 / MIB
HOROVOD_LAYER_SOURCE = "installed size of the horovod 0.28.1 build of scripts/install.sh, measured here"

# How fast a fresh host pulls an image: "A standard Docker pull of a 10GB image on a fresh
# node takes 4-5 minutes" (Union.ai, "We cut container cold boot from minutes to seconds",
# https://web.union.ai/blog-post/we-cut-container-cold-boot-from-minutes-to-seconds-heres-how):
# 10 GB in 4.5 min. A third party's figure, not AWS's and not measured here (this machine has
# neither Docker nor AWS); replace it with a job's own (TrainingStartTime to the first log line).
PULL_BYTES_PER_SECOND = 10e9 / (4.5 * 60)
PULL_SOURCE = ("Union.ai: a 10 GB image pulls in 4-5 min on a fresh node (third-party; "
               "web.union.ai/blog-post/we-cut-container-cold-boot-from-minutes-to-seconds-heres-how)")

# Building Horovod 0.28.1 from source with TF + MPI + Gloo (`pip wheel --no-build-isolation`,
# scripts/install.sh's variables, MAKEFLAGS=-j2) on this 2-core machine, shared with other
# work: 280 s in `make install` (its log line to the cached wheel's mtime), 2296 s for the
# same command timed again under heavier load. The faster is taken: the floor here, with no
# NCCL (the GPU build compiles more) and no download (network isolation forbids it).
HOROVOD_BUILD_SECONDS = 280.0
HOROVOD_BUILD_SOURCE = ("pip wheel horovod==0.28.1 (TF, MPI, Gloo) on this 2-core machine: 280 s, "
                        "the faster of two builds (2296 s under load)")

OWN_IMAGE = "own image"
BUILD_AT_START = "build at start"
CHOICES = (OWN_IMAGE, BUILD_AT_START)


@dataclass(frozen=True)
class Part:
    what: str
    seconds: float
    source: str


@dataclass(frozen=True)
class Startup:
    choice: str
    device: str
    parts: tuple[Part, ...]

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.parts)

    def describe(self) -> list[str]:
        return [f"start-up of a SageMaker training job ({self.choice}, {self.device}): "
                f"{self.seconds:.0f} s on every host",
                *[f"  {p.what}: {p.seconds:.0f} s  [{p.source}]" for p in self.parts]]


def _pull(what: str, mib: float, source: str) -> Part:
    return Part(f"pull {what} ({mib / 1024:.3g} GiB at {PULL_BYTES_PER_SECOND / 1e6:.0f} MB/s)",
                mib * MIB / PULL_BYTES_PER_SECOND, f"{source}; {PULL_SOURCE}")


def training_job(device: str, choice: str = OWN_IMAGE) -> Startup:
    """The seconds before a training job's first step on a ``device`` ("cpu"/"gpu") host."""
    if device not in BASE_IMAGE_MIB:
        raise ValueError(f"device {device!r}: one of {', '.join(BASE_IMAGE_MIB)}")
    if choice not in CHOICES:
        raise ValueError(f"choice {choice!r}: one of {', '.join(CHOICES)}")
    parts = [_pull("AWS's TF 2.14 training image", BASE_IMAGE_MIB[device], BASE_IMAGE_SOURCE)]
    if choice == OWN_IMAGE:
        parts.append(_pull("trainpipe's Horovod layer", HOROVOD_LAYER_MIB, HOROVOD_LAYER_SOURCE))
    else:
        parts.append(Part("build Horovod from source", HOROVOD_BUILD_SECONDS, HOROVOD_BUILD_SOURCE))
    return Startup(choice, device, tuple(parts))


def seconds_for(gpus_per_host: int) -> float:
    """What ``trainpipe advise`` adds to each predicted SageMaker training job: the chosen
    image's pull on a host with ``gpus_per_host`` GPUs."""
    return training_job("gpu" if gpus_per_host else "cpu").seconds
