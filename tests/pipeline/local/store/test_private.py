"""The runner's records are readable by their owner only (pipeline/local/store/private.py)."""

from __future__ import annotations

import os

from pipeline.local.execution import ExecutionRecord
from pipeline.local.store.private import private_dir, write_private


def test_private_files_are_never_readable_by_others_even_under_a_lax_umask(tmp_path):
    old = os.umask(0o000)
    try:
        path = tmp_path / "definition.json"
        write_private(path, '{"Environment": {"DB_PASSWORD": "x"}}')
        assert path.stat().st_mode & 0o777 == 0o600
        write_private(path, "{}")  # rewritten whole
        assert path.read_text() == "{}" and path.stat().st_mode & 0o777 == 0o600
        assert private_dir(tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o700
        record = ExecutionRecord("e1", "p", str(tmp_path / "run"), {"Secret": "x"})
        record.save()
        assert record.path.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
