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
