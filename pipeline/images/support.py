"""What an AWS framework image's tag says, and whether AWS still patches it (``support.json``).

SageMaker runs an image past its end of patch without a word; AWS's support policy says it
gets no more security or bug fixes. ``support.json`` holds, per repository and version, the
end-of-patch date AWS publishes (aws/deep-learning-containers ``docs/src/data/*/*.yml`` and
the older ``docs/reference/support_policy.md``; made by ``tools/image_records.py
support-table``). ``end_of_patch`` words the one warning line a step gets for an image past
that date (with the nearest image AWS still patches) or newer than the data knows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path

SUPPORT_FILE = Path(__file__).resolve().parent / "support.json"
# registry/repository:MAJOR.MINOR[.PATCH][-BUILD]-cpu|gpu[-pyN[NN]]... : AWS's framework image
# tags; SKLearn's name a container build after the version and only Python's major
# (sagemaker-scikit-learn:1.2-1-cpu-py3, the SDK's image_uri_config/sklearn.json versions).
_TAG = re.compile(r"^(?P<registry>[^/]+)/(?P<repository>[a-z0-9-]+):(?P<version>\d+\.\d+)(?P<patch>(?:\.\d+)*)"
                  r"(?:-(?P<build>\d+))?-(?P<accelerator>cpu|gpu|cu\d+)(?:-py(?P<py>\d)(?P<minor>\d+)?(?=-|$))?")
# The Python minor of images whose tag says only py3: ARG PYTHON_VERSION in the version's
# docker/<version>/base/Dockerfile.cpu of aws/sagemaker-scikit-learn-container, at the last
# commit that held the file (0.20.0's names none: not listed, so the nearest record's is used).
_SKLEARN = "aws/sagemaker-scikit-learn-container docker/{}/base/Dockerfile.cpu@{}"
PYTHON_OF_VERSION = {
    ("sagemaker-scikit-learn", (0, 23)): ("3.7", _SKLEARN.format("0.23-1", "e7066208a18a92591cbf3a5e0259c4adf6922359")),
    ("sagemaker-scikit-learn", (1, 0)): ("3.8", _SKLEARN.format("1.0-1", "838ffd2a9c90858898c91da5d0e393fc79f80ab7")),
    ("sagemaker-scikit-learn", (1, 2)): ("3.9", _SKLEARN.format("1.2-1", "04c3893306cfd184bd4e4407886d39405d5a4076")),
    ("sagemaker-scikit-learn", (1, 4)): ("3.10", _SKLEARN.format("1.4-2", "ce928c294552042062bd3c4d08ca6ffb17c826a9")),
}
# A repository AWS continued under another name (PyTorch 2.11 on: "pytorch").
_SUCCESSOR = {"pytorch-training": "pytorch"}


@dataclass(frozen=True)
class Tag:
    registry: str
    repository: str
    version: tuple[int, int]
    accelerator: str
    python: str | None  # "3.7", where the tag names it (or AWS's Dockerfile for its version does)
    build: str = ""  # SKLearn's container build ("-1" of 1.2-1)
    python_source: str = ""  # where ``python`` was read: "its tag", or the Dockerfile's URL

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}{'-' + self.build if self.build else ''}"


def parse(uri: str | None) -> Tag | None:
    """The repository, version, accelerator and Python an AWS framework image's URI names."""
    match = _TAG.match(str(uri or ""))
    if not match:
        return None
    major, minor = match.group("version").split(".")
    version = (int(major), int(minor))
    repository = match.group("repository")
    python, python_source = None, ""
    if match.group("minor"):
        python, python_source = f"{match.group('py')}.{match.group('minor')}", "its tag"
    elif (repository, version) in PYTHON_OF_VERSION:
        python, python_source = PYTHON_OF_VERSION[repository, version]
    # PyTorch 2.11 on names its CUDA build where older tags said gpu (2.13-cu133-amzn2023-sagemaker).
    accelerator = "gpu" if match.group("accelerator").startswith("cu") else match.group("accelerator")
    return Tag(match.group("registry"), repository, version, accelerator, python,
               build=match.group("build") or "", python_source=python_source)


@cache
def _table() -> dict:
    return json.loads(SUPPORT_FILE.read_text())


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _rows(repository: str) -> list[dict]:
    return [row for row in _table()["images"] if row["repository"] == repository]


def _nearest_supported(tag: Tag, today: str) -> dict | None:
    """The oldest image newer than ``tag`` that AWS still patches, same accelerator (its own
    repository first, then the one AWS continued it under); else None."""
    for repository in (tag.repository, _SUCCESSOR.get(tag.repository)):
        candidates = [row for row in _rows(repository or "") if row["eop"] and row["eop"] >= today
                      and row["tag"] and row["accelerator"] in (tag.accelerator, None)
                      and (repository != tag.repository or _version(row["version"]) > tag.version)]
        if candidates:
            return min(candidates, key=lambda row: _version(row["version"]))
    return None


def end_of_patch(uri: str, steps: list[str], today: date | None = None) -> str | None:
    """One warning line for the steps naming an AWS framework image past its end of patch or
    newer than ``support.json`` knows; None for a supported image or one not AWS's."""
    step = f"step {steps[0]}" if len(steps) == 1 else f"steps {', '.join(steps)}"
    tag = parse(uri)
    rows = _rows(tag.repository) if tag else []
    if not rows:
        return None
    today_text = (today or date.today()).isoformat()
    data = _table()["sources"][0]["date"]
    same = [row for row in rows if _version(row["version"]) == tag.version]
    newest = max(rows, key=lambda row: _version(row["version"]))
    if not same and tag.version > _version(newest["version"]):
        return (f"{step}: the image {uri} names {tag.repository} {tag.version_text}, newer than any in "
                f"trainpipe's copy of AWS's support data ({data}; newest {newest['version']}): its end of "
                f"patch and what it holds are not known here")
    oldest = min(rows, key=lambda row: _version(row["version"]))
    if same:
        eop = same[0]["eop"]
        if not eop or eop >= today_text:
            return None
        when = f"AWS's end of patch for {tag.repository} {tag.version_text} was {eop}"
    else:  # older than AWS's table keeps (it lists a version for 2 years after its end of patch)
        when = (f"{tag.repository} {tag.version_text} is older than every version in AWS's support data "
                f"({oldest['version']}'s end of patch was {oldest['eop']})")
    nearest = _nearest_supported(tag, today_text)
    instead = (f"the nearest image AWS still patches is {tag.registry}/{nearest['repository']}:{nearest['tag']} "
               f"(until {nearest['eop']})" if nearest else
               f"AWS's data ({data}) names no {tag.repository} image it still patches")
    return f"{step}: the image {uri} is past its end of patch: {when}, so it gets no security fixes; {instead}"
