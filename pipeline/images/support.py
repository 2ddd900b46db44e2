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
# registry/repository:MAJOR.MINOR[.PATCH]-cpu|gpu[-pyNNN]... : AWS's framework image tags.
_TAG = re.compile(r"^(?P<registry>[^/]+)/(?P<repository>[a-z0-9-]+):(?P<version>\d+\.\d+)(?:\.\d+)*"
                  r"-(?P<accelerator>cpu|gpu|cu\d+)(?:-py(?P<py>\d)(?P<minor>\d+))?")
# A repository AWS continued under another name (PyTorch 2.11 on: "pytorch").
_SUCCESSOR = {"pytorch-training": "pytorch"}


@dataclass(frozen=True)
class Tag:
    registry: str
    repository: str
    version: tuple[int, int]
    accelerator: str
    python: str | None  # "3.7", where the tag names it

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def parse(uri: str | None) -> Tag | None:
    """The repository, version, accelerator and Python an AWS framework image's URI names."""
    match = _TAG.match(str(uri or ""))
    if not match:
        return None
    major, minor = match.group("version").split(".")
    python = f"{match.group('py')}.{match.group('minor')}" if match.group("py") else None
    # PyTorch 2.11 on names its CUDA build where older tags said gpu (2.13-cu133-amzn2023-sagemaker).
    accelerator = "gpu" if match.group("accelerator").startswith("cu") else match.group("accelerator")
    return Tag(match.group("registry"), match.group("repository"), (int(major), int(minor)), accelerator, python)


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
