"""torchrun's command and failure summary (``pipeline/local/hosts/torchrun.py``)."""

from __future__ import annotations

from pipeline.local.hosts import torchrun

SUMMARY = """training started
rank 3 crashed
E1128 01:10:22.618000 22016 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-28_01:10:22
  host      : localhost
  rank      : 3 (local_rank: 1)
  exitcode  : 1 (pid: 22058)
============================================================
"""


def test_the_command_is_the_toolkits_with_a_port_of_the_jobs_own():
    assert torchrun.command("py", ["algo-2", "algo-1"], "algo-2", 2, 40123, "train.py", ["--epochs", "2"]) == [
        "py", "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=2", "--master_addr=algo-1",
        "--master_port=40123", "--node_rank=1", "train.py", "--epochs", "2"]
    one = torchrun.command("py", ["algo-1"], "algo-1", 4, 1, "t.py", [], master_addr="127.0.0.1", log_dir="/l")
    assert one[4:10] == ["--nproc_per_node=4", "--master_addr=127.0.0.1", "--master_port=1", "--node_rank=0",
                        "--log-dir=/l", "--tee=3"]
    assert torchrun.environment(["algo-1", "algo-2"], 40123)["MASTER_ADDR"] == "algo-1"


def test_two_free_ports_in_a_row_are_usable():
    assert 0 < torchrun.free_port() < 65536


def test_the_root_cause_names_the_worker_and_its_own_last_line(tmp_path):
    cause = torchrun.root_cause(SUMMARY)
    assert (cause.rank, cause.exit_code, cause.last_line) == (3, 1, "rank 3 crashed")
    own = tmp_path / "abc_1" / "attempt_0" / "1"
    own.mkdir(parents=True)
    (own / "stderr.log").write_text("Traceback ...\nValueError: bad batch\n")
    assert torchrun.root_cause(SUMMARY, tmp_path).last_line == "ValueError: bad batch"
    assert torchrun.root_cause("killed before any summary") is None
