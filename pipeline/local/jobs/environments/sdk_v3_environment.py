"""The Python an SDK v3 ``@step`` job runs: an environment holding the SageMaker Python SDK v3 at
the client's version, made once per machine on the runner's side, before any step (a job is
offline: ``PIP_NO_INDEX``).

Why the runner's Python does not do, as it does for v2: v2's remote function appends
``sagemaker>=2...,<3`` to the job's dependencies, which the runner's v2 SDK meets; v3's writes
no such line and expects the image to hold the SDK, since its ``job_driver.sh`` runs
``python -m sagemaker.core.remote_function.invoke_function`` (sagemaker-core), which v2 lacks,
and its bootstrap warns when the job's SDK is not the client's version
(``--client_sagemaker_pysdk_version``). So the job's ``python`` is a layer over this
environment (``environment.prepare(interpreter=...)``), which holds nothing of the runner's.

What it holds is pinned in ``sdk-v3-constraints.txt`` beside this module (sagemaker 3.27.0 and
its dependencies for Python 3.11); for a client at another 3.x version the ``sagemaker*`` pins
give way to that version's own. It is made from an interpreter of the client's Python minor
version (the pickles need it; the bootstrap refuses another) under
``~/.cache/trainpipe/image-environments/`` (``TRAINPIPE_IMAGE_ENVIRONMENTS``), sealed like the
seeded image environments, and made again when its files changed.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.jobs.environments import environment
from pipeline.local.jobs.environments.interpreters import (
    Interpreter,
    find_python,
    image_environments,
)

CONSTRAINTS = Path(__file__).with_name("sdk-v3-constraints.txt")
# SageMaker: the SDK's own distributions, whose versions follow the client's sagemaker.
SDK_DISTRIBUTIONS = ("sagemaker==", "sagemaker-")


def option(arguments: list[str], name: str) -> str | None:
    flag = f"--{name}"
    return arguments[arguments.index(flag) + 1] if flag in arguments[:-1] else None


def client_sdk(arguments: list[str]) -> str | None:
    """The client's SageMaker SDK version, when its major version is 3 or later (else None).
    SageMaker: v3's remote function passes it as ``--client_sagemaker_pysdk_version``."""
    version = option(arguments, "client_sagemaker_pysdk_version")
    major = (version or "").split(".", 1)[0]
    return version if major.isdigit() and int(major) >= 3 else None


def constraints(version: str) -> str:
    """The pins for the SDK at ``version``: the file's, less its own SDK lines at another version."""
    lines = CONSTRAINTS.read_text().splitlines()
    if f"sagemaker=={version}" in lines:
        return "".join(f"{line}\n" for line in lines if line and not line.startswith("#"))
    return "".join(f"{line}\n" for line in lines
                   if line and not line.startswith(("#", *SDK_DISTRIBUTIONS)))


def python_for(version: str) -> str | None:
    """An interpreter of Python ``version`` here: the runner's where it is that version."""
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        return sys.executable
    return find_python(version)


def root_for(sdk: str, python: str, python_version: str) -> Path:
    digest = hashlib.sha256("\0".join([python, sdk, constraints(sdk)]).encode()).hexdigest()[:12]
    return image_environments() / f"sagemaker-sdk-{sdk}-py{python_version}-{digest}"


class Unbuildable(Exception):
    """The environment cannot be made here: the one line the runner refuses the run with."""


def interpreter(sdk: str, python_version: str, say=None) -> Interpreter:
    """The job's interpreter for a client at SDK ``sdk`` on Python ``python_version``: its
    environment made now where missing (``Unbuildable`` when it cannot be)."""
    where = f"SageMaker SDK {sdk} on Python {python_version}"
    python = python_for(python_version)
    if python is None:
        raise Unbuildable(f"its job needs {where}, and this machine has no Python {python_version} "
                          f"(install it, or build the pipeline with Python "
                          f"{sys.version_info.major}.{sys.version_info.minor})")
    root = root_for(sdk, python, python_version)
    built = Interpreter(python, True, python_version, seed=root,
                        why=f"the SDK v3 environment of the client's sagemaker {sdk}")
    _build(built, sdk, where, say)
    return built


def _build(built: Interpreter, sdk: str, where: str, say=None) -> None:
    root = built.seed
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / environment.READY_FILE).exists() and environment._intact(root):
            return
        if say is not None:  # a minute or two, once per machine: the run says why it waits
            say(f"SDK v3 @step jobs: making their Python, {where}, in {root} (once per machine)")
        shutil.rmtree(root, ignore_errors=True)
        # With pip: the job's bootstrap runs `pip install -r <dependencies> -U` in it (offline).
        environment._venv(built, root, pip=True)
        (root / "constraints.txt").write_text(constraints(sdk))
        log = root / "install.log"
        with open(log, "w") as out:
            done = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-c",
                                   str(root / "constraints.txt"), f"sagemaker=={sdk}"],
                                  stdout=out, stderr=subprocess.STDOUT, timeout=3600,
                                  env={**environment._pip_base_env(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        if done.returncode != 0:
            lines = log.read_text(errors="replace").strip().splitlines() or ["?"]
            last = next((x for x in lines if x.startswith("ERROR: ")), lines[-1])
            last = re.sub(r" \(from versions: [^)]*\)", "", last)  # every version the registry has: one line
            shutil.rmtree(root, ignore_errors=True)
            raise Unbuildable(f"its job needs {where}, whose environment pip could not make here "
                              f"({last.strip()}); make the package registry reachable for one run, "
                              f"with sagemaker {sdk} on it (the environment is kept in {root.parent})")
        (root / environment.READY_FILE).write_text(built.python + "\n")
        environment.seal(root)


def prepare(steps, say=None) -> None:
    """Make, before any step, the environment of each SDK v3 @step job (``steps``: (name, the
    job's ContainerArguments) pairs); a ``UserError`` names the first that cannot be made."""
    done = set()
    for name, arguments in steps:
        sdk, python = client_sdk(arguments), option(arguments, "client_python_version")
        if not sdk or (sdk, python) in done:
            continue
        try:
            interpreter(sdk, str(python or ""), say)
        except Unbuildable as why:
            raise UserError(f"the local runner cannot run step {name} (Type Training: an SDK v3 "
                            f"@step function: {why})") from None
        done.add((sdk, python))
