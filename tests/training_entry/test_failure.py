"""The failure file (SageMaker's FailureReason) and the exit of a failing rank."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.training_entry.helpers import REPO
from training_entry import failure


def test_failure_file_location(tmp_path, monkeypatch):
    assert failure.failure_file({"SM_OUTPUT_DIR": "/x/out"}) == "/x/out/failure"
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    assert failure.failure_file({}) == f"{tmp_path}/output/failure"


def test_first_failure_of_this_job_wins_a_stale_one_is_replaced(tmp_path):
    path = tmp_path / "output" / "failure"
    path.parent.mkdir()
    path.write_text("from an earlier job")
    old = time.time() - 3600
    os.utime(path, (old, old))
    started = time.time() - 1
    assert failure.write_failure("the cause", str(path), started)
    assert not failure.write_failure("its echo on another rank", str(path), started)
    assert path.read_text() == "the cause"


def test_reason_is_one_line_and_at_most_1_kb():
    assert failure.describe(ValueError("bad\n  value"), "rank 1 of 2") == "ValueError: bad value [rank 1 of 2]"
    assert failure.describe(failure.UserError("fix this")) == "fix this"
    assert len(failure.truncate_utf8("é" * 1000)) == 1024
    assert failure.truncate_utf8("é" * 1000).decode() == "é" * 512


def _run(code: str, tmp_path):
    env = {**os.environ, "SAGEMAKER_BASE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("SM_OUTPUT_DIR", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_a_failing_main_writes_the_reason_and_exits_non_zero(tmp_path):
    proc = _run(
        "import os\n"
        "from training_entry import failure\n"
        f"os.mkdir({str(tmp_path / 'scratch')!r})\n"
        f"failure.cleanup_on_failure(lambda: os.rmdir({str(tmp_path / 'scratch')!r}))\n"
        "def main():\n"
        "    failure.note_cause(failure.UserError('channel train is empty'))\n"
        "    raise RuntimeError('Graph execution error: ... wrapped by TensorFlow')\n"
        "failure.run_and_report(main, where=lambda: 'rank 1 of 2 on algo-1')\n"
        "print('not reached')\n",
        tmp_path,
    )
    assert proc.returncode == 1
    assert "not reached" not in proc.stdout
    assert "Traceback (most recent call last)" in proc.stderr
    assert (tmp_path / "output" / "failure").read_text() == "channel train is empty [rank 1 of 2 on algo-1]"
    assert not (tmp_path / "scratch").exists()


def test_a_refusal_is_its_one_line_with_no_traceback(tmp_path):
    # Every rank refuses alike: a traceback from each would bury the one line that says the fix.
    proc = _run(
        "from training_entry import failure\n"
        "def main():\n"
        "    raise failure.UserError('batch-size 32 is larger than the 18 records')\n"
        "failure.run_and_report(main, where=lambda: 'rank 1 of 2 on algo-2')\n",
        tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stderr == ("trainpipe: training failed: batch-size 32 is larger than the 18 records "
                           "[rank 1 of 2 on algo-2]\n")
    assert (tmp_path / "output" / "failure").read_text().startswith("batch-size 32 is larger")


def test_a_successful_main_exits_zero_and_writes_nothing(tmp_path):
    proc = _run("from training_entry import failure\nfailure.run_and_report(lambda: None)\n", tmp_path)
    assert proc.returncode == 0
    assert not (tmp_path / "output" / "failure").exists()


def test_the_rank_suffix_reads_back():
    reason = failure.describe(ValueError("bad"), "rank 1 of 2 on algo-2")
    assert failure.split_where(reason) == ("ValueError: bad", 1, "algo-2")
    assert failure.split_where(failure.describe(ValueError("bad"), "rank 1 of 2")) == ("ValueError: bad", 1, None)
    assert failure.split_where(failure.describe(ValueError("bad"), "algo-1")) == ("ValueError: bad", None, "algo-1")
    assert failure.split_where("no suffix [here") == ("no suffix [here", None, None)
    assert failure.split_where("a [list] in the middle") == ("a [list] in the middle", None, None)
    assert failure.split_where("KeyError: [x]") == ("KeyError: [x]", None, None)
