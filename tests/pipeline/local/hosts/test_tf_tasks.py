"""A whole pipeline run with MultiWorkerMirroredStrategy on 2 simulated hosts (slow), and the
processes tf_tasks plans per strategy."""

from __future__ import annotations

import json

import pytest

from pipeline.cli.main import main
from pipeline.local.hosts import tf_config, tf_tasks


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


@pytest.mark.slow
def test_mirrored_pipeline_on_two_hosts_passes_the_accuracy_gate(tmp_path, capsys):
    code = main(["run", "--local", "--distribution", "mirrored", "-p", "ProcessesPerHost=1",
                 "-p", "Epochs=3", "--workdir", str(tmp_path / "w"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert "one script per host (MultiWorkerMirroredStrategy)" in out or code == 0
    assert "Succeeded" in out.splitlines()[-1]
