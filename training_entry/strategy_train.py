"""TrainModel with TensorFlow's MultiWorkerMirroredStrategy or ParameterServerStrategy (build
setting ``--distribution mirrored|parameter_server``); ``train.py`` hands over to ``main``
before Horovod starts. The same cut points as train.py's Horovod order, in the same order;
the strategies' specifics are in ``training_entry/run/strategies.py``.

Writes what train.py writes, from the chief only: ``model/1`` (the same SageMaker-serving
SavedModel), ``checkpoints/epoch-NNNNNN`` and the ``trainpipe-metrics`` lines.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile

import tensorflow as tf

from training_entry import config, contract
from training_entry.input import datasets, records
from training_entry.input.context import InputContext
from training_entry.input.plan import Layout, load_manifest, plan_channel
from training_entry.model import architectures, init_weights
from training_entry.model.network import save_for_serving
from training_entry.run import checkpoints, runtime, strategies
from training_entry.run.callbacks import EpochCheckpoint, LearningRateSchedule, MetricLine
from training_entry.run.fault_injection import injected_failures


def main(argv: list[str]) -> None:
    runtime.set_threads_from_env()
    name = strategies.chosen(argv)
    tf_config = strategies.read_tf_config()
    if name == contract.STRATEGY_PARAMETER_SERVER and tf_config is None:
        # SageMaker: one host runs no parameter servers and writes no TF_CONFIG.
        strategy, workers = tf.distribute.get_strategy(), strategies.Workers(1, 0, True, 1)
    elif name == contract.STRATEGY_PARAMETER_SERVER:
        _, task_type, _ = strategies.tf2_cluster(tf_config)
        if task_type == "worker":
            # ParameterServer: a worker host only serves the chief's steps.
            return strategies.serve_as_worker(tf_config, runtime.Log(True))
        strategy, workers = strategies.parameter_server(tf_config)
    else:
        strategy, workers = strategies.mirrored(tf_config)
    log = runtime.Log(workers.is_chief)
    synchronous = name == contract.STRATEGY_MIRRORED

    cfg = config.load(argv)
    hp = cfg.hp
    for notice in cfg.notices:
        log(notice)
    tf.keras.utils.set_random_seed(hp.seed)
    runtime.set_precision_policy(hp.mixed_precision)

    manifest = load_manifest(cfg.manifest, cfg.train.name)
    if synchronous:
        # MultiWorkerMirrored: one process per host, so a worker's plan is a host's.
        layout = Layout(cfg.hosts.index, cfg.hosts.count, 0, 1)
        gather = lambda obj: strategies.allgather_object(strategy, obj)  # noqa: E731
    else:
        # ParameterServer: the chief plans every record as one stream; each worker takes every
        # workers-th batch of it (shard_for_worker), so no record is read twice per pass.
        layout, gather = Layout(0, 1, 0, 1), None
    train_plan = plan_channel(cfg.train, manifest, layout, hp.batch_size, gather=gather)
    val_plan = None
    if cfg.validation is not None and synchronous:
        val_manifest = load_manifest(cfg.manifest, cfg.validation.name)
        val_plan = plan_channel(cfg.validation, val_manifest, layout, hp.batch_size, gather=gather)
    image_size = hp.image_size if manifest.kind == records.KIND_IMAGE else None
    user_model_file = _user_model_path(hp.model_file)
    architecture = architectures.resolve(hp.model_architecture, manifest.kind, user_model_file)
    inputs = InputContext(
        hosts=cfg.hosts, fifo_dir=cfg.fifo_dir, config_dir=cfg.config_dir,
        private_dir=tempfile.mkdtemp(prefix="trainpipe-pipes-"),
        num_features=manifest.num_features,
        seed=hp.seed + (workers.index or 0) * synchronous,  # ParameterServer: one seed, sharded batches
        image_size=image_size, augmentation=hp.augmentation,
    )
    steps = train_plan.steps  # mirrored: per worker (all the same); parameter server: global
    log(f"{name}: {workers.count} worker(s) on {cfg.hosts.count} host(s); train "
        f"{cfg.train.mode}/{cfg.train.distribution}: {steps} steps of {hp.batch_size} per epoch"
        + (" per worker" if synchronous else " over all workers (asynchronous)")
        + f"; model {architecture}")

    # Model and optimizer under the strategy's scope: mirrored variables, or variables on the
    # parameter servers.
    with strategy.scope():
        model = architectures.build(
            architecture, num_classes=manifest.num_classes, image_size=image_size,
            num_features=manifest.num_features, feature_mean=manifest.feature_mean,
            feature_std=manifest.feature_std, user_model_file=user_model_file,
            hyperparameters=dataclasses.asdict(hp))
        if synchronous:
            synced = strategies.synchronize_batch_norm(model)  # MultiWorkerMirrored: SyncBatchNorm
            if synced:
                log(f"{synced} BatchNormalization layer(s) synchronised across workers")
        # Rate set before every call by LearningRateSchedule: base x workers after warm-up
        # (synchronous), base (asynchronous: each update is one worker's batch).
        optimizer = tf.keras.optimizers.legacy.Adam(learning_rate=hp.base_learning_rate)
        # Keras scales each replica's loss by the global batch and reduces the metrics over
        # every worker (mirrored) or keeps them on the parameter servers (asynchronous).
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], steps_per_execution=hp.steps_per_execution)
        state, epochs_completed = checkpoints.training_state(model, optimizer)

    # Resume: every host received the checkpoints (SageMaker syncs checkpoint_s3_uri to all);
    # mirrored workers check they found the same epoch.
    found = checkpoints.newest(cfg.checkpoint_dir)
    initial_epoch = found.epoch if found is not None else 0
    if synchronous and len(set(gather(initial_epoch))) != 1:
        raise strategies.StrategyError("the workers found different newest checkpoints in "
                                       f"{cfg.checkpoint_dir}; start with the same checkpoints on every host")
    if found is not None:
        checkpoints.restore(state, found, cfg.checkpoint_dir)
        log(f"resuming from {found.path}: {found.epoch} of {hp.epochs} epochs done")
    elif cfg.init is not None:
        log(f"initial weights from {init_weights.load_initial_weights(model, cfg.init.directory, None)}")
    epochs_completed.assign(initial_epoch)

    # Checkpoints written by the chief alone. MultiWorkerMirrored: saving can read synced
    # variables through collectives, so the other workers save too, into a scratch directory.
    checkpoint_dir = cfg.checkpoint_dir if workers.is_chief else tempfile.mkdtemp(prefix="trainpipe-ckpt-")
    callbacks = [
        LearningRateSchedule(hp.base_learning_rate, workers.lr_scale, hp.warmup_epochs, steps),
        EpochCheckpoint(state, epochs_completed, checkpoint_dir, log),
        *injected_failures(workers.index or 0, steps_per_execution=hp.steps_per_execution),
    ]
    if workers.is_chief:
        # SageMaker: the metric_definitions regexes read this line.
        callbacks.append(MetricLine(hp.batch_size * max(workers.count, 1) if synchronous else hp.batch_size,
                                    steps))
    if initial_epoch < hp.epochs:
        epochs = hp.epochs - initial_epoch
        model.fit(
            _dataset(strategy, synchronous, train_plan, inputs, epochs, workers),
            steps_per_epoch=steps, epochs=hp.epochs, initial_epoch=initial_epoch,
            validation_data=(tf.keras.utils.experimental.DatasetCreator(
                lambda _: datasets.validation_dataset(val_plan, inputs)) if val_plan else None),
            validation_steps=val_plan.steps if val_plan else None,
            callbacks=callbacks, verbose=0)
    if not workers.is_chief:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)

    # SageMaker: the same SavedModel whatever the strategy, written by the chief. MultiWorker-
    # Mirrored: saving reads synced variables through collectives, so every worker saves (the
    # others into a scratch directory) and none leaves while the chief still needs it.
    model_dir = cfg.model_dir if workers.is_chief else tempfile.mkdtemp(prefix="trainpipe-model-")
    log(f"saved {save_for_serving(model, model_dir, contract.MODEL_VERSION, image_size, class_names=manifest.class_names)}")
    if not workers.is_chief:
        shutil.rmtree(model_dir, ignore_errors=True)
    inputs.cleanup()


def _user_model_path(model_file: str | None) -> str | None:
    """SageMaker: relative to the bundle's root (/opt/ml/code), as train.py reads it."""
    if not model_file or os.path.isabs(model_file):
        return model_file or None
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), model_file)


def _dataset(strategy, synchronous, plan, inputs, epochs, workers):
    """Each worker's own batches, never re-sharded or re-batched by Keras."""
    if synchronous:
        # MultiWorkerMirrored: built in each worker's process from its plan (any input mode).
        return tf.keras.utils.experimental.DatasetCreator(
            lambda _: datasets.training_dataset(plan, inputs, epochs))
    count = workers.count

    def per_worker(_):
        # ParameterServer: traced on the chief, run on every worker: the same stream with the
        # same seed, every count-th batch from this worker's index (read on the worker).
        return datasets.training_dataset(plan, inputs, epochs).shard(count, _worker_index(inputs.config_dir))

    return tf.keras.utils.experimental.DatasetCreator(per_worker)


def _worker_index(config_dir: str):
    """ParameterServer: on the worker that runs it, its index among hosts[1:], from the
    host's own resourceconfig.json (SageMaker: current_host "algo-N", N from 1)."""
    text = tf.io.read_file(config_dir.rstrip("/") + "/resourceconfig.json")
    number = tf.strings.regex_replace(text, r'(?s).*"current_host"\s*:\s*"algo-(\d+)".*', r"\1")
    return tf.strings.to_number(number, tf.int64) - 2
