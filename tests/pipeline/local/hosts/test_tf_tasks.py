"""The processes tf_tasks plans per strategy, and what the local runner does with them when a
parameter server dies (slow). The strategies' whole-pipeline runs are the entrypoint's tests:
tests/training_entry/test_strategy_train.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pipeline.local.hosts import launch_settings, tf_config, tf_tasks

REPO = Path(__file__).resolve().parents[4]
MARK = "TRAINPIPE_TEST_TF_TASKS_MARK"
# A script that only waits: the launcher's behaviour, not training, is under test.
WAITING_SCRIPT = "import time\nprint('script up', flush=True)\ntime.sleep(300)\n"


def test_plan_per_strategy():
    hosts = ["algo-1", "algo-2"]
    assert tf_tasks.plan({"sagemaker_mpi_enabled": True}, hosts) is None
    # SageMaker: one host with parameter servers runs the bare script.
    assert tf_tasks.plan({tf_config.PARAMETER_SERVER_ENABLED: True}, ["algo-1"]) is None
    ps = tf_tasks.plan({tf_config.PARAMETER_SERVER_ENABLED: True}, hosts)
    assert ps.has_ps
    assert json.loads(ps.script_config("algo-1"))["task"] == {"index": 0, "type": "master"}
    assert json.loads(ps.ps_config("algo-2"))["task"] == {"index": 1, "type": "ps"}
    mirrored = tf_tasks.plan({tf_config.MULTI_WORKER_MIRRORED_ENABLED: True}, hosts)
    assert not mirrored.has_ps
    assert json.loads(mirrored.script_config("algo-2"))["task"] == {"index": 1, "type": "worker"}


def test_mirrored_scripts_get_their_share_of_the_cores_and_the_user_wins():
    mirrored = tf_tasks.plan({tf_config.MULTI_WORKER_MIRRORED_ENABLED: True}, ["algo-1", "algo-2"])
    launch = mirrored.local_launch(environ={})
    cores = len(launch_settings.usable_cpus())
    share = str(max(1, cores // 2))
    assert launch.env["TF_NUM_INTRAOP_THREADS"] == share and launch.env["TF_NUM_INTEROP_THREADS"] == "1"
    # No mpirun: neither Horovod's cycle nor the pinning shim's CPU list.
    assert launch_settings.CYCLE_TIME_ENV not in launch.env and launch_settings.AFFINITY_ENV not in launch.env
    assert not launch.pin and not launch.mpirun_options
    # What the job's Environment sets is left to it.
    mine = mirrored.local_launch(request_env={"TF_NUM_INTRAOP_THREADS": "3"}, environ={})
    assert "TF_NUM_INTRAOP_THREADS" not in mine.env
    assert mine.apply_env({"TF_NUM_INTRAOP_THREADS": "3"})["TF_NUM_INTRAOP_THREADS"] == "3"
    default = mirrored.local_launch(environ={launch_settings.RANK_THREADS_ENV: "default"})
    assert default.env == {}


def test_parameter_server_tasks_keep_tensorflows_threads():
    # One inter-op thread hung a worker at its first step (tf_tasks.TfTasks.local_launch).
    ps = tf_tasks.plan({tf_config.PARAMETER_SERVER_ENABLED: True}, ["algo-1", "algo-2"])
    assert ps.local_launch(environ={}).env == {}


def test_the_parameter_server_program_ends_on_sigterm_with_exit_0():
    """The job stops its servers with SIGTERM once the scripts are done; a server blocked in
    server.join() would never run the Python handler, and the job would hang."""
    assert "server.join()" not in tf_tasks.PS_PROGRAM
    assert "signal.pause()" in tf_tasks.PS_PROGRAM


def _job_processes(mark: str) -> dict[int, dict]:
    """pid -> environment of every live process that carries the job's mark."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or f"{MARK}={mark}".encode() not in raw:
            continue
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        found[int(entry.name)] = env
    return found


def _parameter_server(processes: dict[int, dict], index: int) -> int | None:
    for pid, env in processes.items():
        config = json.loads(env.get("TF_CONFIG") or "{}")
        if config.get("task") == {"index": index, "type": "ps"}:
            return pid
    return None


@pytest.mark.slow
def test_a_killed_parameter_server_fails_the_job_at_once_with_its_reason(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(WAITING_SCRIPT)
    mark = uuid.uuid4().hex
    job = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli.main", "train", "--local", "--entry-point", str(script),
         "--instances", "2", "--distribution", "parameter_server", "--env", f"{MARK}={mark}",
         "--workdir", str(tmp_path / "w")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        server = None
        while server is None and time.monotonic() < deadline and job.poll() is None:
            logs = list((tmp_path / "w").glob("jobs/*/logs/algo-2.ps.log"))
            if logs and "serving at" in logs[0].read_text(errors="replace"):
                server = _parameter_server(_job_processes(mark), 1)
            time.sleep(0.2)
        assert server is not None, "the parameter server of algo-2 never came up"
        assert len(_job_processes(mark)) >= 4  # 2 scripts and 2 parameter servers
        os.kill(server, signal.SIGKILL)
        killed = time.monotonic()
        out, err = job.communicate(timeout=60)
        ended = time.monotonic() - killed
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 1, out[-2000:] + err[-2000:]
    # Within seconds: the runner polls the servers; the scripts' grace period is not waited for.
    assert ended < 15, f"the job took {ended:.1f}s to fail"
    reason = err.strip().splitlines()[-1]
    # The task (its label: the host's parameter server) and how it ended.
    assert "algo-2.ps was killed by signal 9 (SIGKILL)" in reason, reason
    assert _job_processes(mark) == {}, "processes of the job were left behind"


@pytest.mark.slow
@pytest.mark.parametrize("strategy,tasks", [("parameter_server", 4), ("mirrored", 2)])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_kill_of_the_runner_leaves_no_task_behind(tmp_path, strategy, tasks, stop):
    script = tmp_path / "wait.py"
    script.write_text(WAITING_SCRIPT)
    mark = uuid.uuid4().hex
    job = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli.main", "train", "--local", "--entry-point", str(script),
         "--instances", "2", "--distribution", strategy, "--env", f"{MARK}={mark}",
         "--workdir", str(tmp_path / "w")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        # Every task up: both scripts (and, with parameter servers, both servers) print.
        while time.monotonic() < deadline and job.poll() is None:
            logs = list((tmp_path / "w").glob("jobs/*/logs/*.log"))
            up = sum(1 for p in logs if re.search(r"script up|serving at", p.read_text(errors="replace")))
            if up >= tasks:
                break
            time.sleep(0.2)
        assert len(_job_processes(mark)) >= tasks, "the job's tasks never came up"
        job.send_signal(stop)  # the runner only, as a terminal's Ctrl-C or `kill` reaches it
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 130, err[-2000:]  # Stopped (pipeline/cli/local/commands.py EXIT_STOPPED)
    assert _job_processes(mark) == {}, "processes of the job were left behind"
