"""Which Python a local job runs (``choose``), and what its code tells before it runs
(``facts``): the image's own where this machine has it, ``TRAINPIPE_IMAGE_PYTHON``'s, or the
runner's (the reasons are in ``choose`` and in ``environment.py``'s docstring)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from pipeline.environment import scrubbed
from pipeline.errors import UserError

IMAGE_PYTHON_ENV = "TRAINPIPE_IMAGE_PYTHON"
_IMAGE_PY = re.compile(r"(?<![A-Za-z0-9])py(\d)(\d*)(?![0-9])")


@dataclass(frozen=True)
class Interpreter:
    python: str  # the interpreter the venv is made from
    mapped: bool  # not the runner's: TRAINPIPE_IMAGE_PYTHON's, or the image's (``seed``)
    version: str  # "3.11"
    # The image's Python found on this machine: the environment holding the image's pinned
    # packages the job imports (``seeded``), made once per machine.
    seed: Path | None = None
    why: str = ""  # one clause for the job's log: why this interpreter


def image_python(image_uri: str) -> str | None:
    """The Python an image has, from its tag (``...-cpu-py310-ubuntu20.04`` -> ``3.10``)."""
    match = _IMAGE_PY.search(str(image_uri or "").rsplit("/", 1)[-1])
    if not match:
        return None
    return f"{match.group(1)}.{match.group(2)}" if match.group(2) else match.group(1)


def parse_mapping(text: str) -> list[tuple[re.Pattern, str]]:
    """``REGEX=PYTHON;REGEX=PYTHON`` -> [(compiled, python)]; one line naming a bad entry."""
    entries = []
    for item in filter(None, (part.strip() for part in (text or "").split(";"))):
        pattern, sep, python = item.rpartition("=")
        if not sep or not pattern or not python:
            raise UserError(f"{IMAGE_PYTHON_ENV} entry {item!r}: expected IMAGE_REGEX=/path/to/python")
        try:
            entries.append((re.compile(pattern), python))
        except re.error as error:
            raise UserError(f"{IMAGE_PYTHON_ENV} entry {item!r}: bad regex: {error}") from None
    return entries


def _version_of(python: str) -> str:
    # Another Python (its site's .pth files run at its start): given what a job gets, no more.
    done = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, timeout=60, env=scrubbed(os.environ))
    if done.returncode != 0:
        raise OSError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "exit "
                      f"{done.returncode}")
    return done.stdout.strip()


def interpreter_for(image_uri: str, environ: Mapping[str, str] = os.environ) -> Interpreter:
    """The runner's Python, unless ``TRAINPIPE_IMAGE_PYTHON`` maps ``image_uri`` elsewhere."""
    for pattern, python in parse_mapping(environ.get(IMAGE_PYTHON_ENV, "")):
        if pattern.search(str(image_uri or "")):
            found = shutil.which(python)
            if found is None:
                raise UserError(f"{IMAGE_PYTHON_ENV} maps {image_uri} to {python}, which is not "
                                f"an executable; fix the path or remove the entry")
            try:
                version = _version_of(found)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise UserError(f"{IMAGE_PYTHON_ENV} maps {image_uri} to {python}, which does "
                                f"not run ({error})") from None
            return Interpreter(found, True, version)
    return Interpreter(sys.executable, False, f"{sys.version_info[0]}.{sys.version_info[1]}")


# Frameworks whose image copy the runner itself holds (TensorFlow 2.14.1 here and in the TF
# 2.14 images): a job importing one from its image runs under the runner's Python, with the
# image guard and a parse check under the image's version, instead of installing the
# framework again for another Python (minutes and gigabytes per run; docs/local-mode.md).
HEAVY_FRAMEWORKS = frozenset({"tensorflow", "torch", "horovod", "mxnet", "jax", "keras"})
IMAGE_ENVIRONMENTS_ENV = "TRAINPIPE_IMAGE_ENVIRONMENTS"  # where seeded image environments live
# What an image is for, in its environment whenever the code uses any of its packages: what the
# code loads may import it from a library's code, out of the pre-run check's sight (a model
# joblib.load()s imports sklearn from joblib's pickle).
IMAGE_FRAMEWORKS = {"aws-sklearn-": "scikit-learn", "aws-xgboost-": "xgboost"}


@dataclass(frozen=True)
class CodeFacts:
    """What a job's code tells before it runs (``facts``)."""
    record: object | None  # pipeline.images.catalog.ImageRecord
    imports: frozenset[str]  # top-level modules the code imports (not its own, not stdlib)
    wanted: frozenset[str]  # modules its requirements and its own pip installs provide
    opaque: bool  # it pip-installs what cannot be known before it runs
    # The modules of the distributions its requirements name themselves (``wanted`` adds what
    # those pull in): deepspeed's requirements name torch, which pip finds installed on a
    # PyTorch image and leaves alone.
    named: frozenset[str] = frozenset()
    # Distributions trainpipe's own code needs in the job's Python beside the code's imports:
    # the model server behind a Transform (serving.handler's starlette and uvicorn), which in
    # SageMaker is the image's own server. Installed into the seeded environment only, under
    # the record's constraints (``_pins``).
    runtime: tuple[str, ...] = ()
    # Modules imported only where their absence is handled (``try: import x``, a ``find_spec``
    # test): the image's are in its environment, so the code takes the branch it takes there.
    optional: frozenset[str] = frozenset()


def facts(image_uri: str, requirements: bytes | None, code_paths=()) -> CodeFacts:
    from pipeline.images import catalog

    record = catalog.find(image_uri)
    if record is None:
        return CodeFacts(None, frozenset(), frozenset(), False)
    files, texts = {}, [(requirements or b"").decode(errors="replace")]
    for top in map(Path, code_paths):
        for path in ([top] if top.is_file() else sorted(top.rglob("*"))[:2000]):
            if not path.is_file() or path.is_symlink() or path.stat().st_size > 4 << 20:
                continue
            if path.suffix == ".py":
                files[str(path)] = path.read_text(errors="replace")
            elif path.name == "requirements.txt":
                texts.append(path.read_text(errors="replace"))
            elif path.name.endswith(".tar.gz"):
                # FrameworkProcessor's sourcedir.tar.gz: runproc.sh unpacks it when the job
                # starts (its code is not on disk yet) and installs its requirements.txt.
                for name, data in _archived_code(path).items():
                    if name.endswith(".py"):
                        files[f"{path}/{name}"] = data.decode(errors="replace")
                    else:
                        texts.append(data.decode(errors="replace"))
    return facts_of(record, files, texts)


def facts_of(record, files: Mapping[str, str], texts: list[str], entry_points=None) -> CodeFacts:
    """``facts`` of code already read: ``files`` (path -> text), ``texts`` (requirements)."""
    from pipeline.images.distributions import modules_of, parse_requirements
    from pipeline.images.imports import scan, stdlib

    scanned = scan(files, entry_points, record.python)
    wanted = parse_requirements("\n".join([*texts, *scanned.pip_installs]))
    imports = frozenset(scanned.imports) - stdlib(record.python)
    named = frozenset(m for d in wanted.distributions for m in modules_of(d).modules)
    return CodeFacts(record, imports, frozenset(wanted.modules), scanned.pip_opaque or bool(wanted.opaque),
                     named=named, optional=frozenset(scanned.every) - imports - stdlib(record.python))


@cache
def find_python(version: str) -> str | None:
    """An interpreter of Python ``version`` ("3.9") on this machine that runs: on PATH
    (``python3.9``; a pyenv shim that is not activated does not run), else pyenv's."""
    candidates = [shutil.which(f"python{version}")]
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += sorted(map(str, root.glob(f"versions/{version}.*/bin/python{version}")), reverse=True)
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for candidate in filter(None, candidates):
        try:
            if Path(candidate).exists() and _version_of(candidate) == version:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def choose(image_uri: str, code: CodeFacts | None, environ: Mapping[str, str] = os.environ) -> Interpreter:
    """The job's interpreter: ``TRAINPIPE_IMAGE_PYTHON``'s where it maps the image; else the
    image's Python where this machine has that interpreter and the job imports no framework
    of its image that the runner holds, over an environment of the image's pinned versions of
    what the code imports (``seeded``: made once per machine; what resolves depends on the
    Python too, ``pip install tensorflow==2.11.0`` exists for 3.9, not 3.11); else the
    runner's, with the image guard and the pre-run parse check under the image's version.
    Why not the image's Python for its TensorFlow or torch: the framework would be installed
    again for it, per machine (TensorFlow 2.14 for Python 3.10 is 588 MB); the smaller
    packages are (measured on this 2-core machine: 84 s for numpy alone, 141 s for SKLearn
    1.2-1's pandas/scikit-learn/numpy/scipy, once per machine)."""
    mapped = interpreter_for(image_uri, environ)
    record = code.record if code is not None else None
    if mapped.mapped or record is None:
        return mapped
    runner = mapped.version
    judged = f"the image's Python is {record.python}, " + (
        "this machine's too" if record.python == runner else "whose syntax the pre-run check judged")
    # A framework the requirements only pull in (DeepSpeed's torch) is the image's: pip keeps it.
    from_image = sorted((code.imports & HEAVY_FRAMEWORKS & record.modules) - code.named)
    if from_image:
        return Interpreter(mapped.python, False, runner,
                           why=f"the image's {' and '.join(from_image)} "
                               f"{'is' if len(from_image) == 1 else 'are'} this machine's; {judged}")
    # Every other job runs the image's Python, whether it installs anything or not: a job that
    # installs nothing still imports the image's versions (scikit-learn 1.2.1 on SKLearn 1.2-1,
    # where this machine's 1.9 has root_mean_squared_error) and the image's standard library
    # (``from datetime import UTC`` is 3.11's, an ImportError on the image's 3.9). An image of
    # this machine's Python version too: its pins, not this machine's packages (a PyTorch 2.5
    # image's processing job importing pandas gets the image's pandas).
    found = find_python(record.python)
    if found is None:
        differ = versions_differ(record, code)
        versions = f"; it runs this machine's {', '.join(differ)}" if differ else ""
        return Interpreter(mapped.python, False, runner,
                           why=f"the image's Python {record.python} is not on this machine "
                               f"({IMAGE_PYTHON_ENV} maps an image to one){versions}")
    # A package the Dockerfile names without a version (the image resolved it when it was built):
    # no version here to match, so the job's log says what it gets instead.
    unpinned = unpinned_of(record, code)
    return Interpreter(found, True, record.python, seed=_seed_root(found, record, code),
                       why=f"the image's Python, with its {record.name} packages the code imports"
                           + (f"; the record pins no version of {', '.join(unpinned)}: pip's newest for "
                              f"Python {record.python}" if unpinned else ""))


def unpinned_of(record, code: CodeFacts) -> list[str]:
    """The image's distributions the seeded environment installs for the code (``_pins``) whose
    record gives no exact version (``unpinned``, ``dependency (unpinned)``, a range)."""
    wanted, constraints = _pins(record, code)
    pinned = {c.split("==", 1)[0] for c in constraints}
    return [name for name in wanted if name not in pinned and name not in code.runtime]


def versions_differ(record, code: CodeFacts) -> list[str]:
    """``scikit-learn 1.9.1, the image's 1.2.1`` for each distribution the code imports from
    its image whose exact pin (the record's) is not the version this runner holds."""
    from importlib import metadata

    from pipeline.images.distributions import modules_of

    differ = []
    for distribution, version in sorted(record.packages.items()):
        name = distribution.split(" ", 1)[0]
        exact = re.fullmatch(r"(?:==)?\s*([0-9][0-9A-Za-z.+!-]*)", str(version).strip())
        if not exact or not set(modules_of(name).modules) & (code.imports - code.wanted):
            continue
        try:
            here = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # not this runner's either: the image guard speaks for it
        if here != exact.group(1):
            differ.append(f"{name} {here}, the image's {exact.group(1)}")
    return differ


def _pins(record, code: CodeFacts) -> tuple[list[str], list[str]]:
    """(what to install: the image's distributions providing what the code imports and does
    not install itself, those its requirements or its own pip installs name (the image has
    them already: pip leaves ``pandas`` at the image's 1.1.3 unless a version is asked for, as
    on SageMaker) and those it imports optionally, less a framework the runner holds; with any
    of them, the image's own framework (``IMAGE_FRAMEWORKS``); then ``code.runtime``;
    constraints: every exact version the record gives)."""
    from pipeline.images.distributions import modules_of

    asked = (code.imports - code.wanted) | ((code.named | code.optional) - HEAVY_FRAMEWORKS)
    wanted, constraints = [], []
    for distribution, version in sorted(record.packages.items()):
        name = distribution.split(" ", 1)[0]
        exact = re.fullmatch(r"(?:==)?\s*([0-9][0-9A-Za-z.+!-]*)(?:\s.*)?", str(version))
        if exact and not str(version).startswith(("dependency", "unpinned")):
            constraints.append(f"{name}=={exact.group(1)}")
        if set(modules_of(name).modules) & asked:
            wanted.append(name)
    framework = next((d for prefix, d in IMAGE_FRAMEWORKS.items() if record.name.startswith(prefix)), None)
    if wanted and framework in record.packages and framework not in wanted:
        wanted.append(framework)
    wanted += [name for name in code.runtime if name not in wanted]
    return wanted, constraints


def seeded_modules(code: CodeFacts) -> frozenset[str]:
    """The top-level modules of what ``_pins`` puts in the image's environment for ``code``."""
    from pipeline.images.distributions import modules_of

    return frozenset(m for name in _pins(code.record, code)[0] for m in modules_of(name).modules)


def _seed_root(python: str, record, code: CodeFacts) -> Path:
    """One environment per image and interpreter, which every job of the image adds what it
    imports to (``environment.seeded``): numpy is installed once, not once per set of imports."""
    _, constraints = _pins(record, code)
    digest = hashlib.sha256("\0".join([python, record.name, "--", *constraints]).encode()).hexdigest()[:12]
    return image_environments() / f"{record.name}-py{record.python}-{digest}"


def image_environments() -> Path:
    """Where environments made once per machine live (seeded image environments, the SDK v3's)."""
    return Path(os.environ.get(IMAGE_ENVIRONMENTS_ENV) or
                Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainpipe" / "image-environments")



def _archived_code(path: Path) -> dict[str, bytes]:
    """An archive's Python files and requirements.txt files (member name -> bytes)."""
    from training_entry import archives

    return archives.read_members(str(path), lambda name: name.endswith(".py") or
                                 PurePosixPath(name).name == "requirements.txt", 10_000, 4 << 20)
