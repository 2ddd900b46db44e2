"""What a job's requirements file may name as requirements files: files of the job's own code.

The runner, not the job, runs ``pip install -r`` on a training job's requirements
(``environments/environment.py``), on this machine's filesystem: inside a PID namespace of its
own with the credential files hidden where hosts get one, beside the runner where they do not
(``hosts/namespaces.py``). Either way a file outside the code may exist here and not in the
job's container, and ``-r`` of it would work here only. pip reads what the file names with
``-r``/``-c`` as requirements text and echoes each line it cannot parse into the job's log:
``-r /home/me/.aws/credentials`` printed the secret. So those files must lie inside the code,
named by relative paths without ``..``, ``~`` or ``$VAR`` (pip expands environment variables
in these files), and no link may lead out; checked before pip runs and before any file outside
the code is read. A package, a wheel or folder path, an index or an http(s) URL is pip's to
judge, as before: pip does not print their contents (a wheel path out of the code works here
and fails on SageMaker, as it always did).
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path, PurePosixPath

from pipeline.local.jobs.failures import CLIENT_ERROR, JobFailure

# pip's options that name a file it reads as requirements text; the others that take a value
# (skipped with it, so that a value is never taken for an option).
FILE_OPTIONS = ("-r", "--requirement", "-c", "--constraint")
PATH_OPTIONS = ("-e", "--editable", "-f", "--find-links", "-i", "--index-url", "--extra-index-url")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
MAX_FILES = 100  # nested -r files: more is no real project's


class OutsideCode(Exception):
    """The one-line reason a requirements file is refused."""


WHY = ("pip runs on this machine, where that file may exist though the job's container has no "
       "such file: pip would read it and echo its lines into the job's log")


def checked_bytes(requirements: Path, code: Path) -> bytes:
    """``requirements``' bytes, once it and what it names are the code's; else the job fails
    in one line (a client error: the code is the job's to fix), before pip reads anything."""
    try:
        check(requirements, code)
    except OutsideCode as error:
        raise JobFailure(f"{error} ({WHY})", CLIENT_ERROR) from None
    return requirements.read_bytes()


def check(requirements: Path, code: Path) -> None:
    """Raise ``OutsideCode`` when ``requirements`` (a file under ``code``) or anything it names
    would make pip read or install from outside ``code``."""
    root = Path(os.path.realpath(code))
    seen: set[Path] = set()
    pending = [(Path(requirements), None)]
    while pending:
        path, named_by = pending.pop()
        real = Path(os.path.realpath(path))
        if not _inside(real, root):
            where = f" (named by {named_by})" if named_by else ""
            raise OutsideCode(f"requirements file {_shown(path, code)}{where} is a link out of the job's code")
        if real in seen or not real.is_file():
            continue  # a missing nested file is pip's to say, as SageMaker's would
        seen.add(real)
        if len(seen) > MAX_FILES:
            raise OutsideCode(f"requirements file {_shown(path, code)}: more than {MAX_FILES} nested files")
        for number, option, value in _references(real.read_text(errors="replace")):
            shown = _shown(path, code)
            if option not in FILE_OPTIONS or not _local_path(value):
                continue
            if not _relative_inside(value):
                raise OutsideCode(f"{shown}, line {number}: {option + ' ' if option else ''}{value!r} names "
                                  f"a path outside the job's code; name files of the code by relative paths "
                                  f"without '..', '~' or '$'")
            target = Path(os.path.realpath(real.parent / value))
            if not _inside(target, root):
                raise OutsideCode(f"{shown}, line {number}: {value!r} is a link out of the job's code")
            if option in FILE_OPTIONS:
                pending.append((real.parent / value, f"{shown}, line {number}"))


def _references(text: str):
    """(line number, option or "", value) for each path-like word of the file's lines."""
    number, joined = 0, ""
    for count, raw in enumerate(text.splitlines(), 1):
        if not joined:
            number = count
        line = raw.rstrip()
        if line.endswith("\\"):  # pip joins a line ending in a backslash with the next
            joined += line[:-1] + " "
            continue
        line, joined = joined + line, ""
        line = re.sub(r"(^|\s+)#.*$", "", line).strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        yield from _words(number, words)


def _words(number: int, words: list[str]):
    index = 0
    while index < len(words):
        word = words[index]
        option = next((o for o in FILE_OPTIONS + PATH_OPTIONS if word == o or word.startswith(o + "=")
                       or (len(o) == 2 and word.startswith(o) and len(word) > 2 and not word.startswith("--"))), None)
        if option is not None:
            if word == option:
                index += 1
                value = words[index] if index < len(words) else ""
            else:
                value = word[len(option):].lstrip("=")
            yield number, option, value
        elif index == 0 and not word.startswith("-"):
            return  # a requirement: its per-requirement options name no file pip reads as text
        index += 1


def _local_path(value: str) -> bool:
    """Whether pip would read ``value`` (a -r/-c argument) from this machine's files."""
    return bool(value) and (value.lower().startswith("file:") or not _URL.match(value))


def _relative_inside(value: str) -> bool:
    if value.lower().startswith("file:") or "$" in value or value.startswith("~") or "\\" in value:
        return False
    path = PurePosixPath(value)
    return not path.is_absolute() and ".." not in path.parts


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _shown(path: Path, code: Path) -> str:
    try:
        return str(Path(path).relative_to(code))
    except ValueError:
        return str(path)
