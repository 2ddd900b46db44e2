"""What the run says before any step about a job that will not run its image's Python
(issue 47): the job's log says it too, but only once the job has started, after every
earlier step; a difference SageMaker would not have must be known at the start.

Two cases keep the runner's interpreter (``interpreters.choose``):

- the job imports a framework of its image that this machine holds (TensorFlow, torch,
  Horovod): it is not installed again for the image's Python (TensorFlow 2.14 for Python
  3.10 is 588 MB), so the job runs this machine's Python and its copy of the framework;
- the image's Python is not on this machine (the line names each distribution the job
  imports that its image pins at another version than this machine's).

``note`` is handed to the image check (``pipeline/local/dag/image_check.check``), which
cannot import the jobs' side itself (the import contracts in pyproject.toml).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from importlib import metadata

from pipeline.local.jobs.environments.interpreters import (
    HEAVY_FRAMEWORKS,
    IMAGE_PYTHON_ENV,
    choose,
    facts_of,
    find_python,
    versions_differ,
)

_EXACT = re.compile(r"(?:==)?\s*([0-9][0-9A-Za-z.*+!-]*)")


def note(job, environ: Mapping[str, str] = os.environ) -> str | None:
    """The one line (without its step) saying that ``job`` (``image_check.JobCode``) runs this
    machine's Python rather than its image's, and what of its versions differ; None where it
    runs the image's Python (or the one ``TRAINPIPE_IMAGE_PYTHON`` maps the image to)."""
    from pipeline.images import catalog

    record = catalog.find(job.image_uri)  # as the job finds it (interpreters.facts)
    if record is None:
        return None
    code = facts_of(record, job.files, [job.requirements or ""], job.entry_points)
    chosen = choose(job.image_uri, code, environ)
    if chosen.mapped:  # the image's Python (seeded), or the one TRAINPIPE_IMAGE_PYTHON names
        return None
    image = f"the image's Python {record.python}"
    heavy = sorted((code.imports & HEAVY_FRAMEWORKS & record.modules) - code.named)
    if heavy:
        here = ", ".join(f"{m} {_here(m) or '(none)'}" for m in heavy)
        theirs = [f"{m} {v}" for m in heavy if (v := _image_version(record, m)) and v != _here(m)]
        if chosen.version == record.python:  # the same Python: only the framework's version can differ
            return None if not theirs else (
                f"runs this machine's {here}, not the image's {', '.join(theirs)} (record {record.name}): a "
                f"framework is not installed again for the image's Python ({IMAGE_PYTHON_ENV} maps the image "
                f"to an interpreter that has it)")
        return (f"runs this machine's Python {chosen.version} and its {here}, not {image}"
                f"{' and ' + ', '.join(theirs) if theirs else ''} (record {record.name}): a framework is not "
                f"installed again for the image's Python ({IMAGE_PYTHON_ENV} maps the image to an "
                f"interpreter that has it)")
    if find_python(record.python) is not None:
        return None
    differ = versions_differ(record, code)
    return (f"runs this machine's Python {chosen.version}, not {image} (record {record.name}), which is "
            f"not on this machine{': ' + '; '.join(differ) if differ else ''} ({IMAGE_PYTHON_ENV} maps the "
            f"image to one)")


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


def _here(module: str) -> str | None:
    for distribution in _distributions().get(module, ()):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def _image_version(record, module: str) -> str | None:
    """The version the record gives the distribution providing ``module`` (first exact one)."""
    from pipeline.images.distributions import modules_of

    for distribution, version in record.packages.items():
        name = distribution.split(" ", 1)[0]
        exact = _EXACT.match(str(version).strip())
        if exact and module in modules_of(name).modules:
            return exact.group(1)
    return None
