"""The checked-in records of what container images hold (``records/*.json``), found by URI.

One JSON file per image (format: ``README.md`` next to this module). A record names the
image's Python, its Python distributions and the top-level modules they provide, and where
each fact was read, with a date. ``find(uri)`` returns the first record one of whose
``uri_patterns`` (regular expressions) is found in the image URI; records are tried in file
name order, so a narrower record is named to sort first where two could match.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

RECORDS_DIR = Path(__file__).resolve().parent / "records"
REQUIRED_FIELDS = ("name", "uri_patterns", "python", "packages", "modules", "sources", "retrieved")


class RecordError(ValueError):
    """A record file that does not follow the format (a bug in the checkout, not user input)."""


@dataclass(frozen=True)
class ImageRecord:
    name: str
    uri_patterns: tuple[str, ...]
    python: str  # "3.10"
    packages: dict  # distribution -> version (or the specifier the source gives)
    modules: frozenset[str]  # top-level import names the image provides
    sources: tuple[dict, ...]
    retrieved: str
    notes: str = ""
    path: Path | None = field(default=None, compare=False)
    extends: str | None = None  # the record of the image this one is built FROM (its name)
    eop: str | None = None  # AWS's end-of-patch date, YYYY-MM-DD (records made by tools/image_records.py)

    def provides(self, module: str) -> bool:
        return module in self.modules

    @property
    def python_minor(self) -> tuple[int, int]:
        major, minor = self.python.split(".")[:2]
        return int(major), int(minor)


def parse(document: dict, path: Path | None = None) -> ImageRecord:
    where = path.name if path else "record"
    missing = [key for key in REQUIRED_FIELDS if key not in document]
    if missing:
        raise RecordError(f"{where}: missing {', '.join(missing)}")
    if not re.fullmatch(r"3\.\d+", str(document["python"])):
        raise RecordError(f"{where}: python must be MAJOR.MINOR (3.10), not {document['python']!r}")
    for pattern in document["uri_patterns"]:
        try:
            re.compile(pattern)
        except re.error as error:
            raise RecordError(f"{where}: uri pattern {pattern!r}: {error}") from None
    if not document["sources"] or not all(isinstance(s, dict) and s.get("url") for s in document["sources"]):
        raise RecordError(f"{where}: every source needs a url")
    return ImageRecord(
        name=document["name"], uri_patterns=tuple(document["uri_patterns"]),
        python=str(document["python"]), packages=dict(document["packages"]),
        modules=frozenset(document["modules"]), sources=tuple(document["sources"]),
        retrieved=document["retrieved"], notes=document.get("notes", ""), path=path,
        extends=document.get("extends"), eop=document.get("eop"))


@cache
def records(directory: Path = RECORDS_DIR) -> tuple[ImageRecord, ...]:
    """Every record in ``directory``, in file name order; a record that ``extends`` another
    (an image built FROM it) holds that one's packages and modules too."""
    parsed = [parse(json.loads(path.read_text()), path) for path in sorted(Path(directory).glob("*.json"))]
    by_name = {r.name: r for r in parsed}

    def resolved(record: ImageRecord, seen: tuple[str, ...] = ()) -> ImageRecord:
        if record.extends is None:
            return record
        base = by_name.get(record.extends)
        if base is None or record.extends in seen:
            raise RecordError(f"{record.path.name if record.path else record.name}: extends "
                              f"{record.extends!r}, which is not a record here (or a cycle)")
        base = resolved(base, (*seen, record.name))
        return replace(record, packages={**base.packages, **record.packages},
                       modules=base.modules | record.modules)

    return tuple(resolved(r) for r in parsed)


def find(image_uri: str | None, directory: Path = RECORDS_DIR) -> ImageRecord | None:
    """The record of the image ``image_uri`` names, or None when no record matches."""
    uri = str(image_uri or "")
    if not uri:
        return None
    for record in records(directory):
        if any(re.search(pattern, uri) for pattern in record.uri_patterns):
            return record
    return None


def named(prefix: str, directory: Path = RECORDS_DIR) -> ImageRecord | None:
    """The first record whose name starts with ``prefix`` (``trainpipe-`` for our own image)."""
    return next((r for r in records(directory) if r.name.startswith(prefix)), None)


def _repository_version(record: ImageRecord) -> tuple[str, tuple[int, int]] | None:
    """The AWS repository and MAJOR.MINOR a record's first URI pattern names."""
    match = re.match(r"^/([a-z0-9-]+):(\d+)\\\.(\d+)", record.uri_patterns[0]) if record.uri_patterns else None
    return (match.group(1), (int(match.group(2)), int(match.group(3)))) if match else None


def nearest(image_uri: str | None, directory: Path = RECORDS_DIR) -> tuple[ImageRecord, str] | None:
    """For an AWS framework image with no record: the record of the nearest version of the same
    repository (same accelerator first), its Python replaced by the one the tag names, and one
    line saying what that leaves unchecked; None for an image whose tag says nothing usable."""
    from pipeline.images import support

    tag = support.parse(image_uri)
    if tag is None:
        return None
    candidates = []
    for record in records(directory):
        found = _repository_version(record)
        if found and found[0] == tag.repository:
            distance = abs((found[1][0] - tag.version[0]) * 100 + found[1][1] - tag.version[1])
            other_accelerator = f"-{tag.accelerator}" not in record.uri_patterns[0] and "cpu|gpu" not in record.uri_patterns[0]
            candidates.append(((distance, other_accelerator, record.name), record, found[1]))
    if not candidates:
        return None
    _, record, (major, minor) = min(candidates, key=lambda c: c[0])
    python = tag.python or record.python
    derived = replace(record, python=python, name=f"{record.name}, the nearest to {tag.repository} {tag.version_text}")
    unchecked = (f"no record of {tag.repository} {tag.version_text} (pipeline/images/records/): its code is judged "
                 f"against {record.name} ({major}.{minor}, the nearest recorded) under Python {python}"
                 f"{' from ' + tag.python_source if tag.python else ''}; what {tag.version_text} holds that {major}.{minor} "
                 f"does not, and every package's version, are not checked")
    return derived, unchecked

