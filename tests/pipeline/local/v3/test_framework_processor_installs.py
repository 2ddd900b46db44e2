"""An SDK v3 FrameworkProcessor's requirements, installed by the SDK's own helper in the job
(runproc.sh: ``python3 .../install_requirements.py requirements.txt``), through the CLI.

Two helpers, both run for real in the job:

- the pinned SDK's (sagemaker-core 2.27.0, with sagemaker 3.27.0, the newest release): it runs
  ``python -m pip install -r``; the test reads it from the SDK v3 environment trainpipe makes
  for v3 ``@step`` jobs (``sdk_v3_environment.py``; made once per machine, ~100 s, with the
  package registry reachable);
- the uv one of aws/sagemaker-python-sdk pull request 5967 (unreleased): it installs uv with
  pip where the image lacks it, then runs ``uv pip install --system -r``. uv's ``--system``
  passes over every virtual environment, and a job's Python here is one (the job's layer): the
  job must tell uv that its interpreter is the system's, as the image's is in SageMaker. The
  helper fetches uv from the package registry unless this machine's PATH has it (~5 s).

The definition is the one tests/pipeline/local/dag/test_image_check.py builds (the requirements
from a wheel folder of their own); only the helper beside runproc.sh differs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pipeline.local.jobs.environments import sdk_v3_environment
from tests.pipeline.local.dag.test_image_check import build_v3_framework_processor, run
from tests.pipeline.local.jobs.environments.test_environment import build_wheel

SDK = "3.27.0"  # the version sdk-v3-constraints.txt pins
HELPER_KEY = "report-v3/source/install_requirements.py"  # beside runproc.sh (build_v3_framework_processor)

# Pull request 5967's helper (aws/sagemaker-python-sdk dc2bb8b0,
# sagemaker-core/src/sagemaker/core/utils/install_requirements.py), less CodeArtifact (unset
# in a job without CA_REPOSITORY_ARN): its uv bootstrap, its pip-config bridge and its command.
UV_HELPER = '''\
import os
import shutil
import subprocess
import sys


def _ensure_uv(python_executable):
    uv = shutil.which("uv")
    if uv:
        return uv
    subprocess.check_call([python_executable, "-m", "pip", "install", "uv"])
    return shutil.which("uv") or "uv"


def _pip_config_get(python_executable, key):
    try:
        out = subprocess.check_output([python_executable, "-m", "pip", "config", "get", key],
                                      stderr=subprocess.DEVNULL)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return out.decode().strip() or None


def install_requirements(requirements_file="requirements.txt", python_executable=None):
    python_executable = python_executable or sys.executable
    uv = _ensure_uv(python_executable)
    env = os.environ.copy()
    for key, name in (("global.index-url", "UV_INDEX_URL"), ("global.extra-index-url", "UV_EXTRA_INDEX_URL"),
                      ("global.trusted-host", "UV_INSECURE_HOST")):
        value = _pip_config_get(python_executable, key)
        if value:
            env[name] = value
    install_cmd = [uv, "pip", "install", "--system", "-r", requirements_file]
    subprocess.check_call(install_cmd, env=env)


if __name__ == "__main__":
    install_requirements(sys.argv[1] if len(sys.argv) > 1 else "requirements.txt")
'''


def pinned_helper() -> str:
    """The pinned SDK's install_requirements.py, as its FrameworkProcessor uploads it."""
    python = sdk_v3_environment.interpreter(SDK, f"{sys.version_info.major}.{sys.version_info.minor}")
    (helper,) = python.seed.glob("lib/python*/site-packages/sagemaker/core/utils/install_requirements.py")
    return helper.read_text()


def run_with_helper(tmp_path: Path, helper: str):
    from pipeline.local.store.storage import LocalStorage

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "tpreport", "3.1")
    definition = build_v3_framework_processor(tmp_path, f"--no-index\n--find-links {wheels}\ntpreport==3.1\n")
    LocalStorage(tmp_path / "work" / "store").put_bytes(helper.encode(), f"s3://images-bucket/{HELPER_KEY}")
    return run(tmp_path, definition)


def job_log(tmp_path: Path) -> str:
    (log,) = (tmp_path / "work").glob("runs/*/jobs/*/job.log")
    return log.read_text(errors="replace")


@pytest.mark.slow
def test_the_pinned_sdks_own_helper_installs_the_requirements_where_the_job_imports(tmp_path):
    helper = pinned_helper()
    assert 'pip_cmd = [python_executable, "-m", "pip", "install", "-r", requirements_file]' in helper
    done = run_with_helper(tmp_path, helper)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "==> Report: Succeeded" in done.stdout
    (report,) = (tmp_path / "work").glob("store/**/report.txt")
    assert report.read_text() == "3.1"


@pytest.mark.slow
def test_the_uv_helper_installs_into_the_jobs_python_not_the_machines(tmp_path):
    done = run_with_helper(tmp_path, UV_HELPER)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + job_log(tmp_path)[-3000:]
    assert "==> Report: Succeeded" in done.stdout
    (report,) = (tmp_path / "work").glob("store/**/report.txt")
    assert report.read_text() == "3.1"
    # uv names the environment it installed into: the job's own layer (gone with the job), not
    # the next Python on this machine's PATH (before UV_PYTHON: ~/.pyenv/versions/3.11.7 here).
    (used,) = re.findall(r"Using Python [\d.]+ environment at: (\S+)", job_log(tmp_path))
    (job,) = (tmp_path / "work").glob("runs/*/jobs/*")
    assert Path(used) == job / "python-env"
