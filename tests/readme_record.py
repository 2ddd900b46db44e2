"""What a test actually printed or raised, recorded for tests/test_readme.py.

The failure table (docs/troubleshooting.md, linked from the README) quotes messages
"verbatim, from a run" and names the test that checks each one. test_readme.py runs those
tests with ``README_MESSAGES_FILE`` set; while it is set (and only then), every message a
test sees is appended to that file: exceptions caught by ``pytest.raises``, what
``capsys.readouterr()`` returns, and what a test hands to
``record`` (messages it reads from a failure file or a subprocess). The table's row must then
equal one of them, so it cannot drift from what the code says.
"""

from __future__ import annotations

import json
import os

ENV = "README_MESSAGES_FILE"  # not TRAINPIPE_*: tests/conftest.py clears those


def recording() -> bool:
    return bool(os.environ.get(ENV))


def record(text: object) -> None:
    """Note ``text`` (a message this test produced) when test_readme.py asks for them."""
    path = os.environ.get(ENV)
    if not path or text is None:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    with open(path, "a") as f:
        f.write(json.dumps({"test": test, "text": str(text)}) + "\n")


def install() -> None:
    """Called by tests/conftest.py when recording: catch what pytest.raises and capsys see."""
    import pytest
    from _pytest.capture import CaptureFixture

    original_raises = pytest.raises

    class Recording:
        def __init__(self, context):
            self.context = context

        def __enter__(self):
            return self.context.__enter__()

        def __exit__(self, kind, value, tb):
            if value is not None:
                record(value)
            return self.context.__exit__(kind, value, tb)

    def raises(*args, **kwargs):
        context = original_raises(*args, **kwargs)
        return Recording(context) if hasattr(context, "__enter__") else context

    pytest.raises = raises

    original_readouterr = CaptureFixture.readouterr

    def readouterr(self):
        result = original_readouterr(self)
        for stream in result:
            if isinstance(stream, str):
                record(stream)
        return result

    CaptureFixture.readouterr = readouterr


class Session:
    """The whole suite's own recording (``make test``): the tests the failure table names
    already run in it, so test_readme.py (moved last by tests/conftest.py) reads what they
    produced instead of running them a second time in a pytest of its own."""

    def __init__(self, path: str):
        self.path = path
        self.collected: set[str] = set()
        self.passed: set[str] = set()

    def covers(self, target: str) -> bool:
        """Every test ``target`` names (a test, its parameters, or a whole file) ran here and passed."""
        mine = {n for n in self.collected
                if n == target or n.startswith((target + "::", target + "["))}
        return bool(mine) and mine <= self.passed

    def produced(self) -> list[dict]:
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.strip()]


SESSION: Session | None = None  # set by tests/conftest.py when the whole suite records
