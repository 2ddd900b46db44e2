"""infra/training-image/Dockerfile under hadolint (the linter `make lint` runs on it), and the
mistake hadolint is here to catch: AWS's TF 2.12 CPU Dockerfile set Horovod's build variables
as shell variables that pip never saw (`HOROVOD_WITH_MPI=1 && ... pip install`)."""

from __future__ import annotations

import subprocess

import pytest

from pipeline.definition.training_image import DOCKERFILE
from tests.moto_aws import REPO_ROOT

HADOLINT = REPO_ROOT / ".venv-lint" / "bin" / "hadolint"

pytestmark = pytest.mark.skipif(not HADOLINT.exists(), reason="hadolint is installed by `make lint` "
                                "(scripts/install-lint.sh); `make test` runs lint first")


def hadolint(path) -> subprocess.CompletedProcess:
    return subprocess.run([str(HADOLINT), "--no-color", str(path)], capture_output=True, text=True, timeout=60)


def test_our_dockerfile_passes_hadolint():
    done = hadolint(DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_flags_build_variables_pip_never_sees(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM ubuntu:20.04\n"
        "RUN HOROVOD_WITH_MPI=1 \\\n"
        "   && HOROVOD_WITH_TENSORFLOW=1 \\\n"
        "   && pip install --no-cache-dir horovod==0.27.0\n")
    done = hadolint(dockerfile)
    assert done.returncode == 1
    assert "SC2034" in done.stdout and "HOROVOD_WITH_TENSORFLOW appears unused" in done.stdout


def test_the_image_pins_the_lite0_weights_package_as_the_pytorch_room_does():
    # One pin for EfficientNet-Lite0's weights in both rooms: the TensorFlow job reads the
    # package the image installs, the PyTorch job the one its requirements.txt names.
    from training_torch.plan import LITE0_REQUIREMENT

    assert f'"{LITE0_REQUIREMENT}"' in DOCKERFILE.read_text()
