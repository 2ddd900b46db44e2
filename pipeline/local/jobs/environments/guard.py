"""What a job may import (issue 34): an import hook written into the job's own layer (its
site-packages, run by a .pth at start-up) so that the job sees what its image holds, not
trainpipe's own packages. Where the job runs the runner's Python it refuses a top-level module
that would come from the runner's site-packages unless the image's record, the requirements or
the code's own ``pip install`` provide it; where it runs the image's Python (issue 47) it also
names the image for a module found nowhere. Either way ``ModuleNotFoundError`` names the image,
as SageMaker's Python would fail; a library's own imports and a probe
(``importlib.util.find_spec``) get what Python would answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.local.jobs.environments.interpreters import CodeFacts

GUARD_MODULE = "trainpipe_image_guard"
GUARD_PTH = "trainpipe-image-guard.pth"

# What every image's Python has whatever its record says: pip runs the job's installs.
_ALWAYS = ("pip", "setuptools", "pkg_resources")
_GUARD_SOURCE = '''"""trainpipe: this job imports what its image holds, not trainpipe's own packages.

Written by trainpipe (pipeline/local/jobs/environments/guard.py) into this job's own environment and
run by the .pth next to it at start-up: a top-level module that would come from trainpipe's
site-packages, and that the image's record, the requirements or the code's own pip install
do not provide, fails as it would in the image.
"""
import importlib
import importlib.machinery
import os
import sys

_CONFIG = {config}
_HELD = tuple(os.path.join(os.path.realpath(p), "") for p in _CONFIG["held"])
_ALLOWED = frozenset(_CONFIG["allowed"])
_IMPORTLIB = os.path.join(os.path.dirname(os.path.realpath(importlib.__file__)), "")


def _importer():
    """(the file whose code asked for the module, past importlib's own frames; whether it
    asked through importlib.util.find_spec, a probe that expects None for a missing module)."""
    frame, probe = sys._getframe(2), False
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<") or os.path.realpath(name).startswith(_IMPORTLIB)):
            return os.path.realpath(name), probe
        # importlib.util is frozen in 3.11 ("<frozen importlib.util>"), a file in others.
        probe = probe or (frame.f_code.co_name == "find_spec" and name.endswith(("util.py", "importlib.util>")))
        frame = frame.f_back
    return "", probe


class TrainpipeImageGuard(importlib.machinery.PathFinder):
    """The path finder of this job: PathFinder, less the top-level modules held back. It takes
    PathFinder's place in sys.meta_path, so a held module is missing (None to a probe), not
    found by a finder after it."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        spec = super().find_spec(name, path, target)
        if spec is None or path is not None or name in _ALLOWED or name.startswith("_"):
            return spec
        where = spec.origin if spec.origin not in (None, "namespace") else \\
            next(iter(spec.submodule_search_locations or []), None)
        if not (where and os.path.realpath(where).startswith(_HELD)):
            return spec
        importer, probe = _importer()
        # A library's own imports are its (this machine's versions); the job's code is judged.
        if importer.startswith(_HELD):
            return spec
        if probe:
            return None
        # On the image's Python: a module of the image that this job's code did not name.
        message = _CONFIG["unseeded" if _CONFIG["seeded"] and name in _IMAGE else "message"]
        raise ModuleNotFoundError(message.format(name=name), name=name)


class TrainpipeImageMissing:
    """Last in sys.meta_path of a job on the image's Python (its environment holds the image's
    packages the code imports, nothing of trainpipe's): a top-level module found nowhere, asked
    for by the job's code, fails naming the image, as the guard's held modules do. A library's
    import and a probe get Python's own answer."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if path is not None or name.startswith("_") or name in _ALLOWED and name not in _IMAGE:
            return None
        # A finder the job added after this one (pyximport, say) is asked first.
        for finder in sys.meta_path[sys.meta_path.index(cls) + 1:]:
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None:
                return spec
        importer, probe = _importer()
        if probe or importer.startswith(_LIBRARIES):
            return None
        message = _CONFIG["unseeded" if name in _IMAGE else "message"]
        raise ModuleNotFoundError(message.format(name=name), name=name)


_IMAGE = frozenset(_CONFIG["image_modules"])
sys.meta_path[:] = [TrainpipeImageGuard if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
if _CONFIG["seeded"]:
    _LIBRARIES = _HELD + tuple(os.path.join(os.path.realpath(p), "") for p in
                               [*_CONFIG["libraries"], os.path.dirname(os.__file__)])
    sys.meta_path.append(TrainpipeImageMissing)
'''


@dataclass(frozen=True)
class Guard:
    """What a job may import from the runner's site-packages: its image's record's modules,
    its requirements' and what its code pip-installs (``guard_for``)."""
    image_uri: str
    record: str
    allowed: frozenset[str]
    image_modules: frozenset[str] = frozenset()  # what the image's record holds

    def message(self) -> str:
        return (f"No module named '{{name}}': the image {self.image_uri} (record {self.record}, "
                f"pipeline/images/records/) does not have it and the job's requirements.txt does not "
                f"install it (trainpipe runs a job with what its image holds, not with trainpipe's own "
                f"packages); add it to requirements.txt, or name an image that has it")

    def unseeded(self) -> str:
        """A module the image has that the job's environment on the image's Python does not."""
        return (f"No module named '{{name}}': the image {self.image_uri} (record {self.record}) has it, but "
                f"trainpipe made this job's environment on the image's Python with only the image's "
                f"packages the code imports, found by reading it (an import of a name built at run time "
                f"is not seen); import it by name in the code, or add it to requirements.txt")

    def install(self, site: Path, held: list[str], libraries: list[str] | None = None) -> None:
        """``libraries``: where the job runs the image's Python (its seeded environment), the
        site-packages whose code is a library's, not the job's; a module found nowhere then
        fails naming the image too (``TrainpipeImageMissing``)."""
        config = {"held": list(held), "allowed": sorted(self.allowed | set(_ALWAYS)),
                  "message": self.message(), "image": self.image_uri, "seeded": libraries is not None,
                  "libraries": list(libraries or ()), "image_modules": sorted(self.image_modules),
                  "unseeded": self.unseeded()}
        (site / f"{GUARD_MODULE}.py").write_text(_GUARD_SOURCE.replace("{config}", repr(config)))
        (site / GUARD_PTH).write_text(f"import {GUARD_MODULE}\n")


def guard_for(image_uri: str, code: CodeFacts) -> Guard | None:
    """The guard for a job of ``image_uri``: None where the image has no record (the job
    sees every package of this machine, as before; the pre-run check warned) or where the code
    pip-installs what cannot be known before it runs."""
    if code.record is None or code.opaque:
        return None
    return Guard(str(image_uri), code.record.name, frozenset(code.record.modules | code.wanted),
                 frozenset(code.record.modules))
