"""The Python a local job runs: a virtual environment layered over the runner's (or over an
interpreter the user maps the job's image to), in which the job's ``pip install`` lands.

SageMaker runs a job in its image's Python, in a container thrown away afterwards, so a
script may ``pip install`` what it likes (AWS's examples do, ``subprocess.check_call([
sys.executable, "-m", "pip", "install", ...])``; the toolkit installs the code's
``requirements.txt``). Here the job's ``python3`` would otherwise be trainpipe's own venv, which
every later job and trainpipe itself use. So each job runs in a venv of its own:

- created with ``--without-pip`` from the runner's interpreter; a ``.pth`` file puts the
  runner's site-packages *after* the venv's own, so the job imports everything trainpipe has
  (TensorFlow, Horovod) and what it installs shadows it. pip itself is the runner's pip module
  run by the venv's interpreter: it installs into the venv (``sys.prefix``) and, for a version
  the runner already has, says "Not uninstalling ... outside environment" and leaves the
  runner's copy alone. ``pip``/``pip3`` by name on the job's PATH are the venv's;
- cached under the workdir per interpreter, image URI and requirements (what a job installs
  itself goes into its own layer, below, never into this cache);
- its interpreter (``choose``): the image's Python (from the image's record) where this
  machine has that interpreter, whether the job installs anything or not, over an environment
  of the image's pinned versions of what the code imports, made once per machine (``seeded``);
  else the runner's, where the job uses the image's TensorFlow or Horovod (this machine's, at
  the image's version) or this machine lacks the image's Python;
- ``TRAINPIPE_IMAGE_PYTHON`` maps image URIs to interpreters, so that a job can run the image's
  real versions (TensorFlow 2.11 on Python 3.10, say) where this machine's Python cannot:

      TRAINPIPE_IMAGE_PYTHON='tensorflow-training:2\\.11=/opt/py310/bin/python3.10;sklearn=/usr/bin/python3'

  entries ``REGEX=PYTHON`` separated by ``;``, the first whose regex is found in the image URI
  wins (split at the last ``=``). The venv is then made with ``--system-site-packages`` over
  that interpreter, and nothing of the runner's site-packages is added (another Python's
  packages, another ABI).

Two layers, so that a job's changes die with the job (SageMaker throws the container away):

- the cached environment above (per interpreter, image URI and requirements) is where the
  runner installs the code's ``requirements.txt``; the runner seals it afterwards with a
  digest of what it holds, and an environment whose files changed since (a job wrote into
  it) is made again before the next job uses it;
- each job runs in a venv of its own in its job folder, whose site-packages lists the cached
  environment's and the runner's as plain paths: a job's ``pip install`` and any ``.pth`` it
  drops land in its own layer (gone with the job), and ``.pth`` files are only ever run from
  a job's own layer, never from the shared ones.

And the job sees only what its image holds (``pipeline/images/``): where the image has a
record, an import hook in the job's layer (``guard.py``) refuses a top-level module that would
come from the runner's site-packages unless the image's record, the requirements or the code's
own ``pip install`` provide it, and on the image's Python a module found nowhere;
``ModuleNotFoundError`` names the image, as SageMaker's Python would fail. What the job installs itself, its own modules and the standard library are never held,
nor a library's own imports (this machine's versions of its dependencies); a probe
(``importlib.util.find_spec``) finds a held module missing, as in the image.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.hosts import namespaces

# Which Python a job runs, and what its code tells before it runs: interpreters.py (re-exported
# here, where the jobs and the tests have always found them).
# What a job may import from site-packages it does not own: guard.py (re-exported likewise).
from pipeline.local.jobs.environments.guard import GUARD_MODULE, GUARD_PTH, Guard, guard_for  # noqa: F401
from pipeline.local.jobs.environments.interpreters import (  # noqa: F401
    HEAVY_FRAMEWORKS,
    IMAGE_ENVIRONMENTS_ENV,
    IMAGE_PYTHON_ENV,
    CodeFacts,
    Interpreter,
    _pins,
    _seed_root,
    choose,
    facts,
    find_python,
    image_python,
    interpreter_for,
    parse_mapping,
    seeded_modules,
)

# Written into every job venv: the runner's site-packages, after the venv's own.
RUNNER_PTH = "trainpipe-runner.pth"
READY_FILE = "trainpipe-ready"
# The cached environment's digest of its files, written by the runner after it installed.
SEALED_FILE = "trainpipe-sealed"
# A seeded image environment's list of the distributions installed into it so far (``seeded``).
SEEDED_FILE = "trainpipe-seeded"
# A job's own layer, in its job folder: its site-packages names the shared ones.
JOB_LAYER = "python-env"
LAYERS_PTH = "trainpipe-layers.pth"
_PIP_WRAPPER = '#!/bin/sh\n# trainpipe: pip of this job environment (never the runner\'s)\nexec "$(dirname "$0")/python" -m pip "$@"\n'
# pip's last words when nothing matches the requirement on this Python.
_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")


def _key(interpreter: Interpreter, image_uri: str, requirements: bytes | None) -> str:
    digest = hashlib.sha256()
    for part in (interpreter.python, interpreter.version, str(image_uri or ""),
                 sysconfig.get_paths()["purelib"], str(interpreter.seed or "")):
        digest.update(part.encode() + b"\0")
    digest.update(requirements or b"")
    return digest.hexdigest()[:16]


def _slug(image_uri: str) -> str:
    name = str(image_uri or "local").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")[:40] or "image"


@dataclass(frozen=True)
class JobEnvironment:
    root: Path  # the venv the job's processes run
    interpreter: Interpreter
    image_uri: str
    base: Path | None = None  # the cached environment under the job's layer (None: root is it)
    guard: Guard | None = None  # what the job may import from the runner's site-packages

    @property
    def cached(self) -> Path:
        """The cached environment: where the runner installs requirements."""
        return self.base or self.root

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> str:
        return str(self.bin / "python")

    @property
    def image_name(self) -> str:
        return self.image_uri.rsplit("/", 1)[-1] or "local"

    @property
    def image_regex(self) -> str:
        """A TRAINPIPE_IMAGE_PYTHON regex that finds this image (dots escaped)."""
        return self.image_name.replace(".", "\\.")

    def variables(self) -> dict[str, str]:
        """What a job's processes get so that ``python3``, ``pip`` and ``sys.executable`` are
        this environment's (PATH first; the rest of PATH follows)."""
        # SageMaker: the image's Python is the system's, and `uv pip install --system` (a job's
        # own; the SDK's helper in sagemaker-python-sdk PR 5967) installs into it. uv's --system
        # passes over virtual environments, this one too, and would take the next Python on PATH
        # (this machine's): UV_PYTHON names the job's, so what uv installs lands where the job
        # imports from. Its cache beside the job's pip cache: one filesystem, so uv can hardlink.
        return {"VIRTUAL_ENV": str(self.root), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_CACHE_DIR": str(self.root.parent / "pip-cache"), "UV_PYTHON": self.python,
                "UV_CACHE_DIR": str(self.root.parent / "uv-cache")}

    def path(self, rest: str) -> str:
        return os.pathsep.join([str(self.bin), rest]) if rest else str(self.bin)

    def explain(self, package: str) -> str:
        """The one line for an install that cannot resolve on this Python."""
        image = image_python(self.image_uri)
        name = package.split('=')[0].split('<')[0].split('>')[0]
        if self.interpreter.seed is not None:  # the image's own Python: no other to map to
            return (f"pip cannot install {package} on the image's Python {self.interpreter.version} "
                    f"({self.interpreter.python}, as the image {self.image_uri} has): no distribution "
                    f"of {name} matches there either; check the name and the version, and that the "
                    f"package registry is reachable")
        return (f"pip cannot install {package} on this machine's Python {self.interpreter.version} "
                f"({self.interpreter.python}); the image {self.image_uri or '(none)'} has Python "
                f"{image or 'of a version its URI does not say'}: map the image to an interpreter "
                f"that has it, {IMAGE_PYTHON_ENV}='{self.image_regex}=/path/to/python"
                f"{image or '3'}', or pin a version of {name} "
                f"that exists for Python {self.interpreter.version}")

    def install_requirements(self, requirements: Path, log: Path) -> None:
        """SageMaker: the toolkit pip-installs the code's requirements.txt before the script.
        Here the runner installs them into the cached environment (the job's layer reads it),
        then seals it."""
        python = str(self.cached / "bin" / "python")
        # A requirement built from source runs its author's setup.py: the job's code, in all but
        # name. So pip runs as a job does: the jobs' allowlist of variables, and, where hosts get
        # a PID namespace, in one of its own, with the runner user's credential files empty and
        # trainpipe's state read-only (hosts/namespaces.py); not the runner's processes to read.
        argv = namespaces.pid_only_command([python, "-m", "pip", "install", "-r", str(requirements)])
        with open(log, "a") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=self._pip_env(), timeout=3600)
        seal(self.cached)
        if done.returncode != 0:
            text = log.read_text(errors="replace")
            raise InstallFailed(explain_install_failure(text, self) or
                                f"pip install -r {requirements.name} failed with code "
                                f"{done.returncode} (see {log})")

    def _pip_env(self) -> dict[str, str]:
        from pipeline.environment import scrubbed

        env = scrubbed(os.environ)
        env.update(self.variables())
        env["PATH"] = self.path(env.get("PATH") or os.defpath)
        return env


class InstallFailed(Exception):
    """The job's requirements could not be installed: the step's one-line reason."""


def explain_install_failure(log_text: str, environment: JobEnvironment | None) -> str | None:
    """The one line for a pip failure found in a job's output, or None when there is none."""
    found = _NO_MATCH.findall(log_text or "")
    if not found or environment is None:
        return None
    return environment.explain(found[-1])


def prepare(directory: Path, image_uri: str, requirements: bytes | None = None,
            environ: Mapping[str, str] = os.environ, *, job_dir: Path | None = None,
            guard: Guard | None = None, code: CodeFacts | None = None,
            interpreter: Interpreter | None = None) -> JobEnvironment:
    """The cached job environment for ``image_uri`` (and these requirements), made when
    missing or changed since it was sealed; with ``job_dir``, the job's own layer over it
    (holding ``guard`` where given). ``code`` (``facts``) lets the image's Python be chosen
    (``choose``); ``interpreter`` is one whose seed the caller made (the SDK v3's,
    ``sdk_v3_environment.py``). Safe against another trainpipe making the same one at the same time."""
    if interpreter is None:
        interpreter = choose(image_uri, code, environ) if code is not None else interpreter_for(image_uri, environ)
        if interpreter.seed is not None:
            seeded(interpreter, code)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    root = directory / f"{_slug(image_uri)}-{_key(interpreter, image_uri, requirements)}"
    environment = JobEnvironment(root, interpreter, str(image_uri or ""))
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / READY_FILE).exists() and not _intact(root):
            shutil.rmtree(root, ignore_errors=True)  # a job wrote into it: made again
        if not (root / READY_FILE).exists():
            _create(environment)
            seal(root)
    if job_dir is None:
        return environment
    if interpreter.seed is not None and guard is not None and code is not None:
        # The image's environment also holds what the image's other jobs added to it: this job's
        # code sees what its own code put there, on a new machine as on one that ran others.
        guard = dataclasses.replace(guard, allowed=seeded_modules(code) | code.wanted)
    layer = JobEnvironment(Path(job_dir) / JOB_LAYER, interpreter, str(image_uri or ""), base=root,
                           guard=None if interpreter.mapped and interpreter.seed is None else guard)
    _create_layer(layer)
    return layer


def _digest(root: Path) -> str:
    """What a cached environment holds: every file's path, size and modification time."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.name in (SEALED_FILE, READY_FILE) or "__pycache__" in path.parts:
            continue
        try:
            stat = path.lstat()
        except OSError:
            continue
        digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def seal(root: Path) -> None:
    """Record what the cached environment holds now (after the runner's installs)."""
    (Path(root) / SEALED_FILE).write_text(_digest(Path(root)) + "\n")


def _intact(root: Path) -> bool:
    sealed = root / SEALED_FILE
    return sealed.is_file() and sealed.read_text().strip() == _digest(root)


def _create_layer(layer: JobEnvironment) -> None:
    """The job's own venv: its site-packages names the cached environment's and the
    runner's (plain paths: their .pth files never run here)."""
    interpreter = layer.interpreter
    shutil.rmtree(layer.root, ignore_errors=True)
    _venv(interpreter, layer.root)
    cached = _site_packages(str(layer.cached / "bin" / "python"))
    # Two venvs of one interpreter lay out alike: the layer's site-packages sits where the
    # cached environment's does (no interpreter started per job to ask, ~25 ms each).
    relative = Path(cached).relative_to(layer.cached) if Path(cached).is_relative_to(layer.cached) else None
    site = layer.root / relative if relative is not None else Path(_site_packages(layer.python))
    below = _shared_site_packages(interpreter)
    (site / LAYERS_PTH).write_text("".join(f"{p}\n" for p in [cached,
                                                                *below]))
    if layer.guard is not None:
        layer.guard.install(site, below, [str(site), cached] if interpreter.seed is not None else None)
    _pip_wrappers(layer)


def _create(environment: JobEnvironment) -> None:
    root, interpreter = environment.root, environment.interpreter
    shutil.rmtree(root, ignore_errors=True)  # a half-made one from an interrupted run
    _venv(interpreter, root)
    shared = _shared_site_packages(interpreter)
    if shared:
        site = _site_packages(environment.python)
        # After the venv's own site-packages: what the job installs shadows the runner's (or
        # the seeded image environment's).
        Path(site, RUNNER_PTH).write_text("".join(f"{p}\n" for p in shared))
    _pip_wrappers(environment)
    (root / READY_FILE).write_text(interpreter.python + "\n")


def _pip_wrappers(environment: JobEnvironment) -> None:
    for name in ("pip", "pip3", f"pip{environment.interpreter.version}"):
        wrapper = environment.bin / name
        wrapper.write_text(_PIP_WRAPPER)
        wrapper.chmod(0o755)


def _venv(interpreter: Interpreter, root: Path, pip: bool = False) -> None:
    command = [interpreter.python, "-m", "venv", str(root)] if pip else \
        [interpreter.python, "-m", "venv", "--without-pip", str(root)]
    # TRAINPIPE_IMAGE_PYTHON's interpreter brings its own packages; the runner's venv, where it
    # sees the system's, passes them on.
    if (interpreter.mapped and interpreter.seed is None) or (not interpreter.mapped and _runner_sees_system_site()):
        command.insert(-1, "--system-site-packages")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=_pip_base_env())
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise UserError(f"cannot make the job environment {root} from {interpreter.python}: {last}")


def _shared_site_packages(interpreter: Interpreter) -> list[str]:
    """What a job environment reads below its own site-packages: the runner's (same Python),
    the seeded image environment's (the image's Python), or nothing (TRAINPIPE_IMAGE_PYTHON)."""
    if interpreter.seed is not None:
        return [_site_packages(str(interpreter.seed / "bin" / "python"))]
    return [] if interpreter.mapped else _runner_site_packages()


def seeded(interpreter: Interpreter, code: CodeFacts) -> Path:
    """The image's Python with the image's versions of what the job imports, made once per
    machine and image (``~/.cache/trainpipe/image-environments/``): each job adds what it needs
    and the environment lacks (``SEEDED_FILE`` lists what was installed), so numpy is installed
    once for all the image's jobs, and a job sees only the image's packages, at its versions (the
    guard holds back what the record lacks: a Transform's server). Sealed after each change."""
    root = interpreter.seed
    root.parent.mkdir(parents=True, exist_ok=True)
    wanted, constraints = _pins(code.record, code)
    with open(root.parent / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = (root / READY_FILE).exists() and _intact(root)
        have = set((root / SEEDED_FILE).read_text().split()) if ready and (root / SEEDED_FILE).exists() else set()
        missing = [name for name in wanted if name not in have]
        if ready and not missing:
            return root
        if not ready:
            shutil.rmtree(root, ignore_errors=True)
            _venv(interpreter, root, pip=True)
        if missing:
            (root / "constraints.txt").write_text("".join(f"{c}\n" for c in constraints))
            log = root / "install.log"
            with open(log, "a") as out:
                done = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-c",
                                       str(root / "constraints.txt"), *missing], stdout=out,
                                      stderr=subprocess.STDOUT, timeout=3600,
                                      env={**_pip_base_env(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            if done.returncode != 0:
                lines = log.read_text(errors="replace").strip().splitlines() or ["?"]
                # pip's own reason, before its hint lines: "No matching distribution found for X".
                errors = [x for x in lines if x.startswith("ERROR: ")]
                last = next((x for x in errors if _NO_MATCH.search(x)), errors[0] if errors else lines[-1])
                # What earlier jobs installed stays theirs (sealed as it is now); a new one goes.
                if ready:
                    seal(root)
                else:
                    shutil.rmtree(root, ignore_errors=True)
                raise InstallFailed(
                    f"cannot install the image's {' '.join(missing)} for its Python {interpreter.version} "
                    f"({code.record.name}): {last}; make the package registry reachable, or run the "
                    f"job under this machine's Python: {IMAGE_PYTHON_ENV}='{code.record.uri_patterns[0]}="
                    f"{sys.executable}'")
        (root / SEEDED_FILE).write_text("".join(f"{name}\n" for name in sorted(have | set(missing))))
        (root / READY_FILE).write_text(interpreter.python + "\n")
        seal(root)
    return root


def _pip_base_env() -> dict[str, str]:
    from pipeline.environment import scrubbed

    return scrubbed(os.environ)


def _runner_sees_system_site() -> bool:
    config = Path(sys.prefix) / "pyvenv.cfg"
    if sys.prefix == sys.base_prefix or not config.is_file():
        return True  # not a venv: its site-packages are the system's
    return bool(re.search(r"include-system-site-packages\s*=\s*true", config.read_text(), re.I))


def _runner_site_packages() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


@functools.lru_cache(maxsize=64)
def _site_packages(python: str) -> str:
    """Where ``python`` (a venv's, kept for the process's life) installs pure packages."""
    # A job environment's Python runs its installed .pth files at start: what a job gets, no more.
    done = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=60, check=True, env=_pip_base_env())
    return done.stdout.strip()
