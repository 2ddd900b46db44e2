"""Ranks of several simulated hosts on one Open MPI node (pipeline/local/hosts/shared_memory.py,
the shared-memory launch in mpi.py and rank_exec.py)."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.hosts import mpi, namespaces, rank_exec, shared_memory

MPIRUN = mpi.mpirun_path()
HAVE_MPICC = shutil.which("mpicc") is not None


def test_the_shim_reads_the_variable_rank_exec_sets():
    # The C source spells the name itself.
    assert f'getenv("{rank_exec.HOST_INDEX_ENV}")' in shared_memory.SOURCE.read_text()
    assert shared_memory.HOST_INDEX_ENV == rank_exec.HOST_INDEX_ENV


@pytest.mark.skipif(not HAVE_MPICC, reason="no mpicc here")
def test_the_library_is_built_once_and_replaces_mpi_comm_split_type(tmp_path):
    first = shared_memory.build(tmp_path)
    built_at = first.stat().st_mtime_ns
    assert shared_memory.build(tmp_path) == first and first.stat().st_mtime_ns == built_at
    assert [p.name for p in first.parent.iterdir()] == [shared_memory.LIBRARY_NAME]  # no partial left
    library = ctypes.CDLL(str(first))
    assert hasattr(library, "MPI_Comm_split_type")


def test_without_mpicc_or_when_switched_off_it_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="mpicc not found .*libopenmpi-dev"):
        shared_memory.build(tmp_path)
    assert shared_memory.library({shared_memory.SWITCH_ENV: "0"}) == (None, "TRAINPIPE_SHARED_MEMORY=0")
    assert "loopback TCP" in shared_memory.fallback_notice("mpicc not found")


def test_a_shared_memory_launch_is_one_node_and_names_each_rank_s_host(tmp_path):
    spec = {"env": {"LD_PRELOAD": "/usr/lib/user.so"}, "cwd": "/opt/ml/code", "argv": ["python", "train.py"],
            "log": "x-{rank}"}
    launch = mpi.prepare(tmp_path / "mpi", ["algo-1", "algo-2"], 2, {"algo-1": spec, "algo-2": spec},
                         shared_memory_shim=Path("/cache/shim.so"))
    try:
        assert (tmp_path / "mpi" / "hostfile").read_text() == f"{mpi.SHARED_NODE} slots=4\n"
        ranks = json.loads((launch.launch_dir / rank_exec.RANKS_FILE).read_text())
        assert ranks["3"] == {"host": "algo-2", "host_index": 1, "local_rank": 1, "local_size": 2}
        assert ranks["0"] == {"host": "algo-1", "host_index": 0, "local_rank": 0, "local_size": 2}
        written = json.loads((launch.launch_dir / "algo-2.json").read_text())
        # The shim first, the user's own preload kept; set at the last exec only.
        assert written["argv"] == ["env", "LD_PRELOAD=/cache/shim.so /usr/lib/user.so", "python", "train.py"]
        assert (launch.launch_dir / rank_exec.RANKS_FILE).stat().st_mode & 0o777 == 0o600
    finally:
        shutil.rmtree(launch.scratch, ignore_errors=True)


def test_one_host_keeps_its_own_node(tmp_path):
    spec = {"env": {}, "cwd": "/", "argv": ["true"], "log": "x"}
    launch = mpi.prepare(tmp_path / "mpi", ["algo-1"], 2, {"algo-1": spec}, shared_memory_shim=Path("/s.so"))
    try:
        assert (tmp_path / "mpi" / "hostfile").read_text() == "algo-1 slots=2\n"
        assert not (launch.launch_dir / rank_exec.RANKS_FILE).exists()
    finally:
        shutil.rmtree(launch.scratch, ignore_errors=True)


def test_a_signal_names_the_rank_s_simulated_host_not_the_shared_node():
    output = f"mpirun noticed that process rank 3 with PID 42 on node {mpi.SHARED_NODE} exited on signal 9 (Killed)."
    failure = mpi.first_failure(output, mpi.rank_hosts(["algo-1", "algo-2"], 2, 4))
    assert (failure.rank, failure.host, failure.signal) == (3, "algo-2", 9)


TOPOLOGY = """
import json, os, socket
import numpy as np
import horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
total = hvd.allreduce(tf.constant(np.full(50000, hvd.rank() + 1.0, np.float32)), op=hvd.Sum).numpy()
tree = open("/opt/ml/whoami").read().strip() if os.path.exists("/opt/ml/whoami") else None
print(json.dumps({"rank": hvd.rank(), "local": [hvd.local_rank(), hvd.local_size()],
                  "cross": [hvd.cross_rank(), hvd.cross_size()], "sum": float(total[0]),
                  "hostname": socket.gethostname(), "tree": tree, "host": os.environ["SM_CURRENT_HOST"],
                  "ompi_local": os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]}))
"""


@pytest.mark.slow
@pytest.mark.skipif(MPIRUN is None or not HAVE_MPICC, reason="needs mpirun and mpicc")
def test_two_hosts_talk_through_shared_memory_alone_and_keep_sagemaker_s_topology(tmp_path):
    """With TCP taken out of Open MPI's transports the job can only run if every rank is on
    one node; Horovod must still see two hosts of two ranks, each in its host's tree."""
    hosts = ["algo-1", "algo-2"]
    use_namespaces = namespaces.unavailable_reason() is None
    trees = {}
    for host in hosts:
        trees[host] = tmp_path / "hosts" / host
        trees[host].mkdir(parents=True)
        (trees[host] / "whoami").write_text(host)
    script = tmp_path / "topology.py"
    script.write_text(TOPOLOGY)
    specs = {h: {"env": {"SM_CURRENT_HOST": h}, "cwd": "/opt/ml" if use_namespaces else str(trees[h]),
                 "argv": [sys.executable, str(script)], "log": str(tmp_path / f"{h}.rank-{{rank}}.log")}
             for h in hosts}
    launch = mpi.prepare(tmp_path / "mpi", hosts, 2, specs, python=sys.executable,
                         host_trees=trees if use_namespaces else None,
                         hosts_file=namespaces.hosts_file(tmp_path / "etc-hosts", hosts) if use_namespaces else None,
                         shared_memory_shim=shared_memory.build(tmp_path / "cache"))
    command = [("self,vader" if word == "self,vader,tcp" else word) for word in launch.command]
    assert command != launch.command
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    finally:
        shutil.rmtree(launch.scratch, ignore_errors=True)
    logs = {p.name: p.read_text() for p in tmp_path.glob("*.rank-*.log")}
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:], logs)
    seen = sorted((json.loads(line) for text in logs.values() for line in text.splitlines()
                   if line.startswith("{")), key=lambda r: r["rank"])
    assert [r["rank"] for r in seen] == [0, 1, 2, 3]
    for r in seen:
        host = hosts[r["rank"] // 2]
        assert r["host"] == host and r["local"] == [r["rank"] % 2, 2] and r["cross"] == [r["rank"] // 2, 2]
        assert r["ompi_local"] == str(r["rank"] % 2) and r["sum"] == 10.0
        if use_namespaces:
            assert (r["hostname"], r["tree"]) == (host, host)
