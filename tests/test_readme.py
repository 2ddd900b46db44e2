"""The README's promises that a script can check: its first lines, and the failure table.

Each failure-table row names the test that produces its message (``tests/<file>.py::<test>``).
This module runs those tests with ``README_MESSAGES_FILE`` set (``tests/readme_record.py``:
every message they raise, print or read back is recorded) and requires each row's message to
equal one of them verbatim. ``…`` in a row stands for text that differs from run to run (a
temporary path, a timestamp) and matches anything, but only where the README writes it; a CLI
prefix (``trainpipe <command>: error: ``, ``preprocess: ``) may precede the message.

    .venv/bin/pytest tests/test_readme.py -q            (rows whose test is slow: -m slow)
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import readme_record

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
TABLE_HEADING = "## When something is wrong"
ELLIPSIS = "…"
# What a command prints before a message that is the README's.
PREFIX = r"(?:trainpipe [\w-]+: error: |preprocess: |evaluate: )?"


def failure_rows() -> list[tuple[str, str, str]]:
    section = README.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[2].startswith("`tests/"):
            message = re.sub(r"^`+ ?|`+$", "", cells[1]).strip()
            rows.append((cells[0], message, cells[2].strip("`")))
    return rows


def pattern_of(message: str) -> re.Pattern:
    """The README's message as a regex: verbatim, each ``…`` any text."""
    return re.compile(PREFIX + ".*?".join(re.escape(part) for part in message.split(ELLIPSIS)))


def shown_by(message: str, produced: list[str]) -> bool:
    """The message is one whole line (or the whole text) of something the test produced."""
    pattern = pattern_of(message)
    return any(pattern.fullmatch(line) for text in produced for line in [text, *text.splitlines()])


def is_slow(target: str) -> bool:
    """Whether the named test is marked slow (itself or its whole module)."""
    path, _, name = target.partition("::")
    tree = ast.parse((REPO / path).read_text())
    def slow(node) -> bool:
        return "mark.slow" in ast.unparse(node)
    for node in tree.body:
        if isinstance(node, ast.Assign) and slow(node.value) and any(
                getattr(t, "id", "") == "pytestmark" for t in node.targets):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return any(slow(d) for d in node.decorator_list)
    return False


def produced_by(target: str, recorded: dict[str, list[str]]) -> list[str]:
    """What ``target`` (a test, or a whole test file) produced."""
    if "::" in target:
        return recorded.get(target, [])
    return [text for test, texts in recorded.items() if test.startswith(target + "::") for text in texts]


def run_and_record(targets: list[str], tmp_path: Path) -> dict[str, list[str]]:
    """Run ``targets`` in a fresh pytest; what each produced, by target (file::test)."""
    out = tmp_path / "messages.jsonl"
    out.write_text("")
    env = {**os.environ, readme_record.ENV: str(out)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *sorted(set(targets))],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, "the tests the README names must pass:\n" + result.stdout[-3000:]
    produced: dict[str, list[str]] = {}
    for line in out.read_text().splitlines():
        entry = json.loads(line)
        target = re.sub(r"\[.*$", "", entry["test"])
        produced.setdefault(target, []).append(entry["text"])
    return produced


ROWS = failure_rows()
FAST = [r for r in ROWS if not is_slow(r[2])]
SLOW = [r for r in ROWS if is_slow(r[2])]


@pytest.fixture(scope="module")
def fast_messages(tmp_path_factory):
    return run_and_record([r[2] for r in FAST], tmp_path_factory.mktemp("readme"))


@pytest.fixture(scope="module")
def slow_messages(tmp_path_factory):
    return run_and_record([r[2] for r in SLOW], tmp_path_factory.mktemp("readme-slow"))


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


@pytest.mark.parametrize("what, message, target", FAST, ids=lambda v: v[:40])
def test_each_failure_message_is_what_its_test_prints(what, message, target, fast_messages):
    produced = produced_by(target, fast_messages)
    assert produced, f"{what}: {target} produced no message (does it exist and record one?)"
    assert shown_by(message, produced), (
        f"{what}: the README's message is not what {target} produced:\n  README: {message}\n"
        + "\n".join(f"  got:    {t}" for t in produced[:8]))


@pytest.mark.slow
@pytest.mark.parametrize("what, message, target", SLOW, ids=lambda v: v[:40])
def test_each_slow_failure_message_is_what_its_test_prints(what, message, target, slow_messages):
    produced = produced_by(target, slow_messages)
    assert produced, f"{what}: {target} produced no message"
    assert shown_by(message, produced), (
        f"{what}: the README's message is not what {target} produced:\n  README: {message}\n"
        + "\n".join(f"  got:    {t}" for t in produced[:8]))


def test_a_row_with_half_its_message_replaced_is_caught(fast_messages):
    """The check itself: replace either half of any row's message with other text (the
    bug the old pattern test let through) and it no longer matches."""
    for what, message, target in FAST:
        produced = produced_by(target, fast_messages)
        middle = len(message) // 2
        for changed in (message[:middle] + "x" * (len(message) - middle),
                        "x" * middle + message[middle:]):
            assert not shown_by(changed, produced), f"{what}: a changed message still passes"
