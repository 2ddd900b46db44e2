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


def _fit_one_epoch(strategy, lean: bool) -> tuple[dict, list]:
    """One epoch of a small model under ``strategy``, Keras's step or the lean one, from the
    same weights on the same batches: (the epoch's logs, the weights after it)."""
    tf.keras.utils.set_random_seed(7)
    x = tf.random.stateless_normal([256, 8], seed=[1, 2])
    y = tf.cast(tf.reduce_sum(x, axis=1) > 0, tf.int64)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                                     tf.keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.01), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], steps_per_execution=4)
        replaced = strategies.lean_steps(strategy, model, env={}) if lean else False
    assert replaced is lean
    logs = {}
    callbacks = [strategies.WorkerMetrics(steps_per_epoch=8)] if lean else []
    callbacks.append(tf.keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, epoch_logs: logs.update(epoch_logs)))
    dataset = tf.keras.utils.experimental.DatasetCreator(
        lambda _: tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat())
    model.fit(dataset, steps_per_epoch=8, epochs=1, callbacks=callbacks, verbose=0)
    return logs, model.get_weights()


@pytest.fixture(scope="module")
def mirrored():
    # One local worker (no TF_CONFIG): the same Keras code paths as several, without a cluster.
    return tf.distribute.MultiWorkerMirroredStrategy()


def test_the_lean_mirrored_step_trains_and_reports_what_keras_step_does(mirrored):
    keras_logs, keras_weights = _fit_one_epoch(mirrored, lean=False)
    lean_logs, lean_weights = _fit_one_epoch(mirrored, lean=True)
    # The epoch's metrics over the whole epoch (read once at its end), not the last batch's.
    assert lean_logs["loss"] == pytest.approx(keras_logs["loss"], rel=1e-5)
    assert lean_logs["accuracy"] == pytest.approx(keras_logs["accuracy"], rel=1e-5)
    for a, b in zip(keras_weights, lean_weights, strict=True):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6)
    assert not mirrored.extended.experimental_enable_get_next_as_optional


def test_the_lean_step_is_off_on_request_and_a_models_own_step_is_kept(mirrored):
    with mirrored.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(2)])
    assert not strategies.lean_steps(mirrored, model, env={strategies.LEAN_STEP_ENV: "0"})
    assert model.train_step.__func__ is tf.keras.Model.train_step

    class Own(tf.keras.Model):
        def train_step(self, data):
            return super().train_step(data)

    with mirrored.scope():
        inputs = tf.keras.Input((2,))
        own = Own(inputs, tf.keras.layers.Dense(2)(inputs))
    assert not strategies.lean_steps(mirrored, own, env={})
    assert type(own).train_step is Own.train_step and "train_step" not in vars(own)
