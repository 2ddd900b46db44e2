"""Ending a job's processes: whatever the user presses while trainpipe cleans up, no process of
the job survives (``pipeline/local/hosts/processes.py``, ``jobs.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.local.hosts import mpi
from tests.pipeline.local.helpers import leftover_processes

REPO = Path(__file__).resolve().parents[4]

# Ignores SIGTERM, as a script stuck in C code or with its own handler may; so does the child
# it starts. Both write their pids for the test.
STUBBORN = """
    import os, pathlib, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    out = pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"]) / f"pids-{rank}.txt"
    out.write_text(f"{os.getpid()} {child.pid}")
    print("started", flush=True)
    time.sleep(600)
"""


def machine_pids(written: set[int], needle: str) -> list[int]:
    """This machine's pids of the job's processes that wrote ``written``: inside a host's PID
    namespace (namespaces.py) a process knows only its namespace's pid, the last of NSpid."""
    found = []
    for pid in leftover_processes(needle):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [str(pid)])
        if int(nspid[-1]) in written and (len(nspid) > 1 or pid in written):
            found.append(pid)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "hangup"])
@pytest.mark.parametrize("mpi_launch", [False, pytest.param(True, marks=pytest.mark.skipif(
    mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed"))])
def test_two_interrupts_one_second_apart_leave_no_process_of_the_job(tmp_path, mpi_launch, sig):
    code = tmp_path / "code"
    code.mkdir()
    (code / "stubborn.py").write_text(textwrap.dedent(STUBBORN))
    workdir = tmp_path / "work"
    argv = [sys.executable, "-m", "pipeline.cli.main", "train", "--local", "--workdir", str(workdir),
            "--entry-point", "stubborn.py", "--source-dir", str(code), "--job-name", "stubborn"]
    if mpi_launch:
        argv += ["--instances", "2", "--processes-per-host", "1"]
    runner = subprocess.Popen(argv, cwd=tmp_path, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        expected = 2 if mpi_launch else 1
        deadline = time.monotonic() + 90
        pid_files: list[Path] = []
        while len(pid_files) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
            pid_files = list(workdir.rglob("pids-*.txt"))
            assert runner.poll() is None, runner.stdout.read().decode()
        assert len(pid_files) == expected, "the job never started"
        time.sleep(0.5)
        written = {int(p) for f in pid_files for p in f.read_text().split()}
        pids = machine_pids(written, str(tmp_path))
        assert len(pids) == 2 * expected and all(alive(p) for p in pids)
        runner.send_signal(sig)  # Ctrl-C, or the terminal closing
        time.sleep(1.0)
        runner.send_signal(sig)  # and again, during the cleanup
        output = runner.communicate(timeout=60)[0].decode()
    finally:
        if runner.poll() is None:
            runner.kill()
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in pids if alive(p)] == [], output
    assert leftover_processes(str(tmp_path)) == []
    assert runner.returncode != 0
    description = json.loads(next(workdir.rglob("description.json")).read_text())
    assert description["TrainingJobStatus"] == "Stopped", output


def test_hangup_stops_like_sigterm_unless_nohup_ignores_it():
    from pipeline.local.hosts import processes

    with pytest.raises(KeyboardInterrupt), processes.stop_signals_as_interrupt():
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(1)
    assert processes.stop_reason() == "stopped: its terminal closed (SIGHUP)"
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL  # given back
    with processes.interrupts_deferred() as deferred:
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.1)
    assert deferred.since_start == 1
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does
    try:
        with processes.stop_signals_as_interrupt(), processes.interrupts_deferred() as deferred:
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.1)
        assert deferred.since_start == 0
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
        processes._DEFERRED.first = None  # this process was never really stopped
