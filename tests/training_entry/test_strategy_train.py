"""The tf.distribute entrypoint (training_entry/strategy_train.py): who takes part how, and a
whole pipeline on 2 simulated hosts per strategy (slow), through the local runner, that must
pass the pipeline's own accuracy gate (CheckAccuracy) on the bundled digits."""

from __future__ import annotations

import pytest

from pipeline.cli.main import main
from training_entry import contract, strategy_train
from training_entry.run import strategies


def _run(name: str, workers: strategies.Workers) -> strategy_train._Run:
    return strategy_train._Run(name, strategy=None, workers=workers, log=print)


def test_only_the_chief_of_a_parameter_server_cluster_is_coordinated():
    chief = _run(contract.STRATEGY_PARAMETER_SERVER, strategies.Workers(1, None, True, 1))
    assert chief.coordinated and not chief.synchronous
    # SageMaker: one host has no parameter servers; the script trains as one process.
    alone = _run(contract.STRATEGY_PARAMETER_SERVER, strategies.Workers(1, 0, True, 1))
    assert not alone.coordinated
    mirrored = _run(contract.STRATEGY_MIRRORED, strategies.Workers(2, 1, False, 2))
    assert mirrored.synchronous and not mirrored.coordinated


def _pipeline(tmp_path, capsys, strategy: str, *parameters: str) -> list[str]:
    code = main(["run", "--local", "--distribution", strategy, "-p", "ProcessesPerHost=1", "-p", "Epochs=3",
                 *(arg for p in parameters for arg in ("-p", p)), "--workdir", str(tmp_path / "w"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    lines = out.splitlines()
    assert "Succeeded" in lines[-1], out[-3000:]
    return lines


@pytest.mark.slow
def test_mirrored_pipeline_on_two_hosts_passes_the_accuracy_gate(tmp_path, capsys):
    lines = _pipeline(tmp_path, capsys, "mirrored")
    assert any("CheckAccuracy: Succeeded" in line and "if branch" in line for line in lines)


@pytest.mark.slow
def test_parameter_server_pipeline_on_two_hosts_passes_the_accuracy_gate(tmp_path, capsys):
    # The command: trainpipe run --local --distribution parameter_server
    #   -p ProcessesPerHost=1 -p TrainDistribution=FullyReplicated -p Epochs=3
    lines = _pipeline(tmp_path, capsys, "parameter_server", "TrainDistribution=FullyReplicated")
    assert any("CheckAccuracy: Succeeded" in line and "if branch" in line for line in lines)
    # The chief's metric line (epoch hooks only) reached the job's metrics.
    assert any(line.startswith("TrainModel") and "throughput=" in line for line in lines)


@pytest.mark.slow
def test_a_stopped_mirrored_job_ends_at_an_epoch_end_on_every_worker_and_keeps_its_model(tmp_path):
    """Issue 49, as train.py's Horovod test (test_train_mpirun.py): SageMaker stops a job with
    SIGTERM and a grace period, then uploads /opt/ml/model. Two MultiWorkerMirrored workers
    (one process per simulated host, as the toolkit runs them); only worker 1, not the chief,
    gets SIGTERM after the first epoch. Both stop after the same epoch (the gathered flag),
    exit 0, and the chief saves a model that answers."""
    import json
    import os
    import re
    import signal
    import socket
    import subprocess
    import sys
    import time

    from pipeline.local.jobs import contract as local
    from tests.training_entry import helpers

    splits = helpers.make_splits(tmp_path / "digits", shard_count=2)
    epochs = 200  # far more than the test lets it run
    job = helpers.make_job(tmp_path / "job", splits, hosts=2, ranks_per_host=1, epochs=epochs)
    ports = []
    for _ in job.hosts:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    workers = [f"127.0.0.1:{port}" for port in ports]
    procs, logs = [], []
    for index, host in enumerate(job.hosts):
        args = local.user_command(sys.executable, job.hyperparameters, job.base(host))[2:]
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index},
                     "environment": "cloud"}
        env = helpers.base_env({**job.envs[host], "TF_CONFIG": json.dumps(tf_config)})
        logs.append(tmp_path / f"{host}.log")
        with open(logs[-1], "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, str(helpers.TRAIN_PY), *args, "--distribution", contract.STRATEGY_MIRRORED],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=helpers.REPO, start_new_session=True))
    try:
        deadline = time.monotonic() + 180
        while "trainpipe-metrics" not in logs[0].read_text():
            assert all(p.poll() is None for p in procs), logs[0].read_text()[-3000:] + logs[1].read_text()[-3000:]
            assert time.monotonic() < deadline, "no epoch ended"
            time.sleep(0.1)
        procs[1].send_signal(signal.SIGTERM)  # the chief's own SIGTERM never comes
        codes = [p.wait(120) for p in procs]  # SageMaker's grace period
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    chief = logs[0].read_text()
    assert codes == [0, 0], chief[-3000:] + logs[1].read_text()[-3000:]
    (stopped,) = re.findall(r"stopped \(SIGTERM\) after epoch (\d+): saving the model trained so far", chief)
    assert 1 <= int(stopped) < epochs
    lines = [line for line in chief.splitlines() if "trainpipe-metrics" in line]
    assert len(lines) == int(stopped), "no epoch after the stop"
    # The epoch's metric line first, then the stop line that names it.
    assert chief.index(lines[-1]) < chief.index("stopped (SIGTERM)") and f"epoch={stopped} " in lines[-1]
    assert (job.model_dir() / contract.MODEL_VERSION / "saved_model.pb").is_file()
    assert os.listdir(job.model_dir(job.hosts[1])) == []  # the chief alone writes the model
    assert helpers.model_accuracy(job.model_dir(), splits["test"]) >= 0.5
