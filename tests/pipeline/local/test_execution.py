"""An execution's record on disk (``pipeline/local/execution.py``): unique ids, the runner's
lock, reading records that a dead runner, NFS or a broken file left behind."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.local import execution as ex


def test_execution_ids_are_unique_sortable_and_readable():
    ids = [ex.new_execution_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert sorted(ids) == sorted(ids, key=lambda i: i[:22])  # time first: sorting is by time
    assert all(re.fullmatch(r"\d{8}-\d{6}-\d{6}-[0-9a-f]{8}", i) for i in ids), ids[0]


def test_an_execution_folder_is_taken_once_and_private(tmp_path):
    run_dir = tmp_path / "runs" / "20240101-000000-000000-00000000"
    ex.reserve(run_dir)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    with pytest.raises(UserError, match=r"^execution 20240101-000000-000000-00000000 already exists "
                                        r"in .*runs \(another runner took the same id\); run again"):
        ex.reserve(run_dir)


def test_execution_json_is_readable_by_its_owner_only(tmp_path):
    record = ex.ExecutionRecord("e1", "p", str(tmp_path / "runs" / "e1"), {"Password": "hunter2"})
    old = os.umask(0o022)
    try:
        record.save()
        record.finish(ex.SUCCEEDED)
    finally:
        os.umask(old)
    assert stat.S_IMODE(record.path.stat().st_mode) == 0o600
    assert not list(record.path.parent.glob("*.partial"))


def test_a_taken_runner_lock_is_one_line_and_leaks_no_descriptor(tmp_path):
    run_dir = tmp_path / "runs" / "e1"
    held = ex.RunnerLock(run_dir)
    held.acquire()
    try:
        before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(UserError) as taken:
            ex.RunnerLock(run_dir).acquire()
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        held.release()
    assert str(taken.value) == (
        f"execution e1 in {tmp_path} is being run by another trainpipe process (pid {os.getpid()}); "
        f"wait for it to end, or stop it (kill {os.getpid()}), or start a new execution")


def executing(tmp_path: Path, name: str = "e1") -> Path:
    """An execution left Executing by a runner that is gone (its lock free)."""
    record = ex.ExecutionRecord(name, "p", str(tmp_path / "runs" / name), {})
    lock = ex.RunnerLock(Path(record.run_dir))
    lock.acquire()
    record.save()
    lock.release()
    return Path(record.run_dir)


def test_reading_on_nfs_still_finds_a_dead_runner(tmp_path, monkeypatch):
    """NFS emulates flock with fcntl locks: an exclusive lock needs a descriptor open for
    writing (EBADF otherwise). The listing must neither fail nor leave the execution out."""
    real_flock = fcntl.flock

    def nfs_flock(fd, operation):
        read_only = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
        if operation & fcntl.LOCK_EX and read_only:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", nfs_flock)
    run_dir = executing(tmp_path)
    docs = ex.list_executions(tmp_path)
    assert [(d["execution_id"], d["status"]) for d in docs] == [("e1", ex.FAILED)]
    assert json.loads((run_dir / ex.RECORD_FILE).read_text())["status"] == ex.FAILED


def test_a_lock_that_cannot_be_taken_is_said_not_hidden(tmp_path, monkeypatch):
    run_dir = executing(tmp_path)

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    [doc] = ex.list_executions(tmp_path)
    assert doc["status"] == ex.EXECUTING
    assert doc["failure_reason"] == (f"cannot lock {run_dir / ex.RUNNER_LOCK}: No locks available; "
                                     f"whether its runner is alive cannot be checked")


@pytest.mark.parametrize("content, why", [
    ("{\"execution_id\": ", r"Expecting value: line 1 column 18 \(char 17\)"),
    ("[]", "expected a JSON object, found list"),
])
def test_an_unreadable_record_is_listed_with_why(tmp_path, content, why):
    executing(tmp_path, "good")
    broken = tmp_path / "runs" / "broken"
    broken.mkdir()
    (broken / ex.RECORD_FILE).write_text(content)
    docs = {d["execution_id"]: d for d in ex.list_executions(tmp_path)}
    assert set(docs) == {"good", "broken"}
    assert docs["broken"]["status"] == ex.UNREADABLE
    assert re.fullmatch(f"cannot read {re.escape(str(broken / ex.RECORD_FILE))}: {why}",
                        docs["broken"]["failure_reason"])
    # status --local shows it the same way, with an empty step table
    assert "STEP" in ex.summary_table(ex.record_from_document(docs["broken"]))


def test_a_record_the_user_may_not_read_is_listed_with_why(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    run_dir = executing(tmp_path)
    (run_dir / ex.RECORD_FILE).chmod(0)
    [doc] = ex.list_executions(tmp_path)
    assert doc["status"] == ex.UNREADABLE and doc["failure_reason"].endswith(": Permission denied")


def test_recover_dead_runners_marks_only_the_dead(tmp_path):
    executing(tmp_path, "dead")
    alive = ex.ExecutionRecord("alive", "p", str(tmp_path / "runs" / "alive"), {})
    lock = ex.RunnerLock(Path(alive.run_dir))
    lock.acquire()
    try:
        alive.save()
        recovered = ex.recover_dead_runners(tmp_path)
        assert [(d["execution_id"], d["status"], d["swept_processes"]) for d in recovered] == [
            ("dead", ex.FAILED, 0)]
        assert ex.recover_dead_runners(tmp_path) == []  # recorded once
        assert ex.load(Path(alive.run_dir))["status"] == ex.EXECUTING
    finally:
        lock.release()
