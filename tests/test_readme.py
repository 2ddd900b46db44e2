"""The README's promises that a script can check: its first lines, and the failure table.

Each failure-table row names the test that checks that failure; the row's message must
satisfy a pattern (or contain a literal) that test asserts, so the table cannot drift from
what the code says.

    .venv/bin/pytest tests/test_readme.py -q
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
TABLE_HEADING = "## When something is wrong"


def failure_rows() -> list[tuple[str, str, str]]:
    section = README.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[2].startswith("`tests/"):
            message = re.sub(r"^`+ ?|`+$", "", cells[1]).strip()
            rows.append((cells[0], message, cells[2].strip("`")))
    return rows


def asserted_strings(test_file: Path) -> list[str]:
    """String constants of a test module, the constant parts of f-strings included: the
    messages and patterns it asserts. Short or single-word ones prove nothing."""
    found = []
    for node in ast.walk(ast.parse(test_file.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
    return [s for s in found if len(s) >= 15 and " " in s.strip()]


def satisfies(message: str, pattern: str) -> bool:
    if pattern in message:
        return True
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return False


def test_readme_opens_with_the_two_commands():
    head = README.splitlines()[:8]
    assert any(line.startswith("make run") for line in head)
    assert any(line.startswith("make test") for line in head)
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_the_failure_table_covers_what_issue_6_lists():
    covered = " ".join(row[0] for row in failure_rows())
    for item in ("unknown parameter", "below 1", "threshold", "input mode", "distribution",
                 "instance type", "fewer objects than instances", "raw data missing",
                 "raw data empty", "wrong columns", "NaN", "corrupted", "empty channel",
                 "inputdataconfig", "not a SavedModel", "s3://", "schema check"):
        assert item in covered, f"the failure table has no row for {item!r}"


@pytest.mark.parametrize("what, message, test_file", failure_rows(), ids=lambda v: v[:40])
def test_each_failure_message_is_what_its_test_checks(what, message, test_file):
    path = REPO / test_file
    assert path.is_file(), f"{what}: {test_file} does not exist"
    patterns = asserted_strings(path)
    assert any(satisfies(message, p) for p in patterns), (
        f"{what}: no string asserted in {test_file} matches the README's message {message!r}"
    )
