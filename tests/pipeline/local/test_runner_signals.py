"""How a `trainpipe run --local` ends when it is told to (Ctrl-C, SIGTERM, its terminal closing)
or killed outright (SIGKILL): no process of its jobs may outlive it, and its record says how it
ended (``pipeline/local/runner.py``, ``execution.py``, ``hosts/processes.py``).

The job is a two-host MPI training job (mpirun, its daemons and the ranks, each in a session of
its own) whose ranks sleep, so that the signal always arrives mid-job."""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from pipeline.local.hosts import mpi
from pipeline.local.hosts.processes import JOB_TOKEN_FILE, tagged_pids

from .helpers import leftover_processes, put_code, put_script
from .test_runner import CODE, MAKE, TRAIN, TRAIN_CODE, step_definition

pytestmark = pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed")
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def workdir(local_storage, tmp_path):
    put_script(local_storage, CODE, "make.py", MAKE)
    put_code(local_storage, TRAIN_CODE, {"train.py": TRAIN})
    work = tmp_path / "work"
    work.mkdir()
    # The store the fixture filled is tmp_path/store; the CLI takes <workdir>/store.
    (work / "store").symlink_to(tmp_path / "store")
    return work


MPI_2X1 = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "1"}
TORCHRUN_2X2 = {"sagemaker_torch_distributed_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}


def definition_file(tmp_path: Path, mode: str, launch: dict = MPI_2X1) -> Path:
    """The test pipeline, its training step a job of two hosts: by default an MPI job with one
    rank each, else as the ``launch`` framework parameters say."""
    definition = step_definition(mode)
    train = definition["Steps"][1]["Arguments"]
    train["ResourceConfig"]["InstanceCount"] = 2
    train["HyperParameters"].update(launch)
    path = tmp_path / f"{'torchrun' if 'sagemaker_torch_distributed_enabled' in launch else 'definition'}-{mode}.json"
    path.write_text(json.dumps(definition))
    return path


def start(workdir: Path, definition: Path, **popen) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
            "--workdir", str(workdir)]
    popen.setdefault("start_new_session", True)
    popen.setdefault("stdout", subprocess.PIPE)
    return subprocess.Popen(argv, stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, **popen)


def wait_for_both_ranks(workdir: Path, runner: subprocess.Popen, drain=None) -> Path:
    """The training job's folder, once both ranks are running."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if drain is not None:
            drain()
        assert runner.poll() is None, "the run ended before its ranks started"
        logs = list(workdir.glob("runs/*/jobs/*/logs/*.rank-*.log"))
        started = [p for p in logs if "training started" in p.read_text(errors="replace")]
        if len(started) == 2:
            return started[0].parents[1]
        time.sleep(0.2)
    raise AssertionError("the ranks never started")


def record(workdir: Path, job_dir: Path) -> dict:
    return json.loads((job_dir.parents[1] / "execution.json").read_text())


def nothing_left(workdir: Path, token: str) -> None:
    deadline = time.monotonic() + 10
    while (tagged_pids(token) or leftover_processes(str(workdir))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tagged_pids(token) == [] and leftover_processes(str(workdir)) == []


@pytest.mark.parametrize("sig, reason", [
    (signal.SIGINT, "stopped by the user (Ctrl-C / SIGTERM)"),
    (signal.SIGTERM, "stopped by the user (Ctrl-C / SIGTERM)"),
    (signal.SIGHUP, "stopped: its terminal closed (SIGHUP)"),
], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_mid_job_ends_every_process_and_records_the_stop(workdir, tmp_path, sig, reason):
    runner = start(workdir, definition_file(tmp_path, "sleep"))
    try:
        job_dir = wait_for_both_ranks(workdir, runner)
        token = (job_dir / JOB_TOKEN_FILE).read_text()
        assert len(tagged_pids(token)) >= 3  # mpirun, its daemons, the ranks
        runner.send_signal(sig)
        output = runner.communicate(timeout=90)[0].decode()
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, output
    assert output.rstrip().splitlines()[-1].endswith(f" Stopped: {reason}"), output[-2000:]
    doc = record(workdir, job_dir)
    assert doc["status"] == "Stopped" and doc["failure_reason"] == reason
    assert [(s["name"], s["status"]) for s in doc["steps"]] == [("Make", "Succeeded"), ("Train", "Stopped")]
    nothing_left(workdir, token)


def test_ctrl_c_gives_the_scripts_their_grace_and_keeps_the_model_they_saved(workdir, tmp_path):
    """SageMaker's StopTrainingJob: SIGTERM to the script, time to save, the model uploaded. The
    scripts get it (not mpirun, which would kill its ranks a second later) and save on it."""
    runner = start(workdir, definition_file(tmp_path, "save-on-stop"))
    try:
        job_dir = wait_for_both_ranks(workdir, runner)
        token = (job_dir / JOB_TOKEN_FILE).read_text()
        runner.send_signal(signal.SIGINT)
        output = runner.communicate(timeout=90)[0].decode()
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, output
    assert ("stopping: SIGTERM to the job's scripts, which get up to 10 s to end (a training script finishes "
            "its epoch and saves its model); Ctrl-C again ends them at once") in output
    (kept,) = [line.split("the stopped job's model: ")[1] for line in output.splitlines()
               if "the stopped job's model: " in line]
    train = {s["name"]: s for s in record(workdir, job_dir)["steps"]}["Train"]
    assert train["status"] == "Stopped"
    assert train["properties"]["ModelArtifacts"] == {"S3ModelArtifacts": kept}
    bucket, key = kept.removeprefix("s3://").split("/", 1)
    with tarfile.open(workdir / "store" / bucket / key) as archive:
        assert archive.extractfile("weights.txt").read() == b"saved on SIGTERM"
    nothing_left(workdir, token)


def test_a_second_ctrl_c_ends_scripts_that_ignore_their_sigterm_and_keeps_no_model(workdir, tmp_path):
    runner = start(workdir, definition_file(tmp_path, "ignore-stop"))
    try:
        job_dir = wait_for_both_ranks(workdir, runner)
        token = (job_dir / JOB_TOKEN_FILE).read_text()
        runner.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30  # the first stop's line, then the second Ctrl-C
        while "stopping: SIGTERM" not in (job_dir / "job.log").read_text(errors="replace"):
            assert time.monotonic() < deadline, "the first Ctrl-C said nothing"
            time.sleep(0.1)
        runner.send_signal(signal.SIGINT)
        output = runner.communicate(timeout=90)[0].decode()
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, output
    assert "the stopped job's model" not in output
    train = {s["name"]: s for s in record(workdir, job_dir)["steps"]}["Train"]
    assert train["status"] == "Stopped" and "ModelArtifacts" not in train["properties"]
    nothing_left(workdir, token)


def test_closing_the_terminal_mid_job_ends_every_process_and_records_the_stop(workdir, tmp_path):
    """The real hangup: the run's controlling terminal goes away (its writes then fail)."""
    import fcntl
    import termios

    master, slave = os.openpty()

    def own_terminal():  # a session of its own, with this pty as its controlling terminal
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    seen = bytearray()

    def drain():  # what a terminal does: read, so that the run never blocks on a full pty
        while select.select([master], [], [], 0)[0]:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                return

    runner = start(workdir, definition_file(tmp_path, "sleep"), stdin=slave, stdout=slave,
                   start_new_session=False, preexec_fn=own_terminal)
    os.close(slave)
    try:
        job_dir = wait_for_both_ranks(workdir, runner, drain)
        token = (job_dir / JOB_TOKEN_FILE).read_text()
        drain()
        os.close(master)  # the terminal closes: the kernel sends SIGHUP to the run
        runner.wait(timeout=90)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode in (130, 1), seen.decode(errors="replace")[-2000:]
    doc = record(workdir, job_dir)
    assert doc["status"] == "Stopped", doc
    assert doc["failure_reason"] == "stopped: its terminal closed (SIGHUP)"
    nothing_left(workdir, token)


def test_the_next_run_ends_what_a_runner_killed_with_sigkill_left(workdir, tmp_path):
    runner = start(workdir, definition_file(tmp_path, "sleep"))
    try:
        job_dir = wait_for_both_ranks(workdir, runner)
        runner.kill()  # SIGKILL: no cleanup, no last record
        runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    token = (job_dir / JOB_TOKEN_FILE).read_text()
    assert len(tagged_pids(token)) >= 3  # mpirun and the ranks outlived their runner
    dead = record(workdir, job_dir)["execution_id"]

    again = start(workdir, definition_file(tmp_path, "ok"))
    output = again.communicate(timeout=180)[0].decode()
    assert again.returncode == 0, output
    swept = [line for line in output.splitlines() if line.startswith(f"execution {dead} ")]
    assert len(swept) == 1, output
    assert swept[0].startswith(f"execution {dead} was left Executing by a runner that died: "
                               f"recorded as Failed; ")
    assert swept[0].endswith(" leftover process(es) of its jobs ended")
    doc = record(workdir, job_dir)
    assert doc["status"] == "Failed" and doc["failure_reason"].startswith("runner died: ")
    assert [(s["name"], s["status"]) for s in doc["steps"]] == [("Make", "Succeeded"), ("Train", "Failed")]
    nothing_left(workdir, token)


def wait_for_torchrun_workers(workdir: Path, runner: subprocess.Popen, count: int = 4) -> Path:
    """The training job's folder, once ``count`` torchrun workers print that they started."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert runner.poll() is None, "the run ended before its workers started"
        # The torchrun job's host logs (its folder holds torchrun's per-worker logs too).
        logs = [p for d in workdir.glob("runs/*/jobs/*/logs/torchrun-*") for p in d.parent.glob("algo-*.log")]
        if sum(p.read_text(errors="replace").count("training started") for p in logs) >= count:
            return logs[0].parents[1]
        time.sleep(0.2)
    raise AssertionError("the torchrun workers never started")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torchrun needs torch")
def test_ctrl_c_during_a_4_rank_torchrun_job_leaves_no_process(workdir, tmp_path):
    runner = start(workdir, definition_file(tmp_path, "sleep", TORCHRUN_2X2))
    try:
        job_dir = wait_for_torchrun_workers(workdir, runner)
        token = (job_dir / JOB_TOKEN_FILE).read_text()
        assert len(tagged_pids(token)) >= 6  # two torchrun agents, four workers
        runner.send_signal(signal.SIGINT)
        output = runner.communicate(timeout=90)[0].decode()
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, output
    assert record(workdir, job_dir)["status"] == "Stopped"
    nothing_left(workdir, token)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torchrun needs torch")
def test_a_crashed_torchrun_rank_fails_the_job_and_leaves_no_process(workdir, tmp_path):
    runner = start(workdir, definition_file(tmp_path, "one-rank-dies", TORCHRUN_2X2))
    try:
        output = runner.communicate(timeout=180)[0].decode()
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 1, output[-3000:]
    (job_dir,) = {p.parents[1] for p in workdir.glob("runs/*/jobs/*/logs/torchrun-*")}
    doc = record(workdir, job_dir)
    assert doc["status"] == "Failed" and "rank 3 crashed" in json.dumps(doc), json.dumps(doc)[-2000:]
    nothing_left(workdir, (job_dir / JOB_TOKEN_FILE).read_text())
