"""The tf.distribute strategies' pieces that need no cluster: reading the choice and TF_CONFIG,
the refusals, the parameter-server metric line and checkpoint."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from training_entry import contract
from training_entry.run import strategies


def test_the_choice_is_read_before_anything_else_and_defaults_to_horovod():
    assert strategies.chosen(["--epochs", "3"]) == contract.STRATEGY_HOROVOD
    assert strategies.chosen(["--distribution", "mirrored", "--epochs", "3"]) == contract.STRATEGY_MIRRORED
    assert strategies.chosen(["--distribution=parameter_server"]) == contract.STRATEGY_PARAMETER_SERVER


def test_tf_config_as_the_toolkit_writes_it_with_master_read_as_chief():
    toolkit = {"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"],
                           "worker": ["algo-2:2222"]},
               "environment": "cloud", "task": {"index": 0, "type": "master"}}
    config = strategies.read_tf_config({"TF_CONFIG": json.dumps(toolkit)})
    cluster, task_type, index = strategies.tf2_cluster(config)
    assert cluster == {"chief": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"], "worker": ["algo-2:2222"]}
    assert (task_type, index) == ("chief", 0)
    assert strategies.read_tf_config({}) is None
    with pytest.raises(strategies.StrategyError, match="TF_CONFIG is not JSON"):
        strategies.read_tf_config({"TF_CONFIG": "{cluster"})


def test_a_tf_config_of_another_strategy_is_refused_in_one_line():
    mirrored = {"cluster": {"worker": ["algo-1:8890", "algo-2:8890"]}, "task": {"index": 0, "type": "worker"}}
    with pytest.raises(strategies.StrategyError, match="is not the chief of a parameter-server cluster"):
        strategies.parameter_server(mirrored)
    ps_worker = {"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223"], "worker": ["algo-2:2222"]},
                 "task": {"index": 0, "type": "worker"}}
    with pytest.raises(strategies.StrategyError, match="is not the chief of a parameter-server cluster"):
        strategies.parameter_server(ps_worker)


def test_the_parameter_server_metric_line_has_no_batch_hook_and_prints_per_epoch(capsys):
    """Keras refuses batch-level callbacks with a ClusterCoordinator."""
    line = strategies.EpochMetricLine(global_batch=32, steps_per_epoch=10)
    assert not line._implements_train_batch_hooks()
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    line.set_model(model)
    line.on_epoch_begin(0)
    line.on_epoch_end(0, {"loss": 0.5, "accuracy": 0.75})
    metrics = contract.parse_metric_line(capsys.readouterr().out.strip())
    assert metrics["step_time"] > 0 and metrics["throughput"] > 0 and metrics["parameters"] == 10
    assert "step_spread" not in metrics  # not measured without per-call times


def test_the_parameter_server_checkpoint_is_read_and_written_through_the_chief(monkeypatch):
    seen = []
    monkeypatch.setattr(tf.train.Checkpoint, "write", lambda self, prefix, options=None: seen.append(options))
    monkeypatch.setattr(tf.train.Checkpoint, "read", lambda self, path, options=None: seen.append(options))
    state = strategies.ChiefCheckpoint(counter=tf.Variable(1))
    state.write("/tmp/unused")
    state.read("/tmp/unused")
    assert [o.experimental_io_device for o in seen] == [strategies.CHIEF_DEVICE] * 2
