"""TrainModel with TensorFlow's MultiWorkerMirroredStrategy or ParameterServerStrategy (build
setting ``--distribution mirrored|parameter_server``); ``train.py`` hands over to ``main``
before Horovod starts. The same cut points as train.py's Horovod order, in the same order,
one function each (``_start``, ``_plan_input``, ``_build``, ``_resume``, ``_fit``,
``_export``); the strategies' specifics are in ``training_entry/run/strategies.py``.

Writes what train.py writes, from the chief only: ``model/1`` (the same SageMaker-serving
SavedModel), ``checkpoints/epoch-NNNNNN`` and the ``trainpipe-metrics`` lines. A stopped
job (SIGTERM) ends at an epoch end, as train.py's does (``StopOnSigterm``), saves, and exits 0.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass

import tensorflow as tf

from training_entry import config, contract
from training_entry.input import datasets, records
from training_entry.input.context import InputContext
from training_entry.input.plan import ChannelPlan, Layout, load_manifest, plan_channel
from training_entry.model import architectures, init_weights, tabular
from training_entry.model.network import save_for_serving
from training_entry.run import checkpoints, runtime, strategies
from training_entry.run.callbacks import (
    EpochCheckpoint,
    LearningRateSchedule,
    MetricLine,
    StopOnSigterm,
)
from training_entry.run.fault_injection import injected_failures


def main(argv: list[str]) -> None:
    threads_note = _threads_for_model(argv)
    runtime.set_threads_from_env()
    run = _start(strategies.chosen(argv))
    if run is None:
        return  # ParameterServer: this host's worker served the chief's steps; nothing to write
    cfg = config.load(argv)
    hp = cfg.hp
    for notice in (*cfg.notices, threads_note):
        if notice:
            run.log(notice)
    tf.keras.utils.set_random_seed(hp.seed)
    runtime.set_precision_policy(hp.mixed_precision)

    data = _plan_input(run, cfg)
    model, state, epochs_completed = _build(run, cfg, data)
    initial_epoch = _resume(run, cfg, model, state, epochs_completed)
    if initial_epoch < hp.epochs:
        _fit(run, cfg, data, model, state, epochs_completed, initial_epoch)
    _export(run, cfg, data, model)
    data.inputs.cleanup()


def _threads_for_model(argv: list[str]) -> str | None:
    """The local runner's small-step threads (runtime.small_step_threads), decided from the
    model before the strategy starts TensorFlow. Only where the runner allowed it: it never
    does for parameter-server jobs, whose worker hosts need not read the data."""
    if not os.environ.get(contract.SMALL_STEP_THREADS_ENV):
        return None
    cfg = config.load(argv)
    manifest = load_manifest(cfg.manifest, cfg.train.name)
    architecture = architectures.resolve(cfg.hp.model_architecture, manifest.kind, _user_model_path(cfg.hp.model_file))
    return runtime.small_step_threads(architecture)


@dataclass
class _Run:
    """The chosen strategy as this process takes part in it."""

    name: str
    strategy: tf.distribute.Strategy
    workers: strategies.Workers
    log: runtime.Log
    lean: bool = False  # MultiWorkerMirrored: strategies.lean_steps replaced Keras's step

    @property
    def synchronous(self) -> bool:
        return self.name == contract.STRATEGY_MIRRORED

    @property
    def coordinated(self) -> bool:
        """ParameterServer: this is the chief of a cluster, whose variables live on the
        parameter servers (a one-host job has none and trains as one process)."""
        return self.name == contract.STRATEGY_PARAMETER_SERVER and self.workers.index is None

    def gather(self, obj) -> list:
        """MultiWorkerMirrored: every worker's ``obj``, in worker order."""
        return strategies.allgather_object(self.strategy, obj)


def _start(name: str) -> _Run | None:
    """The strategy, created before any other TensorFlow operation; None on a
    parameter-server worker host, once it has served the chief until the chief is gone."""
    tf_config = strategies.read_tf_config()
    if name == contract.STRATEGY_PARAMETER_SERVER and tf_config is None:
        # SageMaker: one host runs no parameter servers and writes no TF_CONFIG.
        strategy, workers = tf.distribute.get_strategy(), strategies.Workers(1, 0, True, 1)
    elif name == contract.STRATEGY_PARAMETER_SERVER:
        _, task_type, _ = strategies.tf2_cluster(tf_config)
        if task_type == "worker":
            # ParameterServer: a worker host only serves the chief's steps. SageMaker: a stopped
            # job's SIGTERM reaches every host; this one serves on until the chief, which stops
            # at its next epoch end and saves, is gone (dying now would leave its steps unserved).
            signal.signal(signal.SIGTERM, lambda *_: None)
            strategies.serve_as_worker(tf_config, runtime.Log(True))
            return None
        strategy, workers = strategies.parameter_server(tf_config)
    else:
        strategy, workers = strategies.mirrored(tf_config)
    return _Run(name, strategy, workers, runtime.Log(workers.is_chief))


@dataclass
class _Input:
    """What the model is built from and trained on."""

    manifest: records.Manifest
    train_plan: ChannelPlan
    val_plan: ChannelPlan | None  # MultiWorkerMirrored only
    inputs: InputContext
    image_size: int | None
    architecture: str
    user_model_file: str | None


def _plan_input(run: _Run, cfg) -> _Input:
    """Cut point ``input``: each worker's share of the records, none read twice per pass."""
    hp = cfg.hp
    manifest = load_manifest(cfg.manifest, cfg.train.name)
    if run.synchronous:
        # MultiWorkerMirrored: one process per host, so a worker's plan is a host's.
        layout, gather = Layout(cfg.hosts.index, cfg.hosts.count, 0, 1), run.gather
    else:
        # ParameterServer: the chief plans every record as one stream; each worker takes every
        # workers-th batch of it (_dataset), so no record is read twice per pass.
        layout, gather = Layout(0, 1, 0, 1), None
    train_plan = plan_channel(cfg.train, manifest, layout, hp.batch_size, gather=gather)
    val_plan = None
    if cfg.validation is not None and run.synchronous:
        # ParameterServer: no validation during fit (the coordinator would run it on the
        # workers, asynchronously); the pipeline's EvaluateModel step scores the model.
        val_manifest = load_manifest(cfg.manifest, cfg.validation.name)
        val_plan = plan_channel(cfg.validation, val_manifest, layout, hp.batch_size, gather=gather)
    image_size = hp.image_size if manifest.kind == records.KIND_IMAGE else None
    user_model_file = _user_model_path(hp.model_file)
    inputs = InputContext(
        hosts=cfg.hosts, fifo_dir=cfg.fifo_dir, config_dir=cfg.config_dir,
        private_dir=tempfile.mkdtemp(prefix="trainpipe-pipes-"),
        num_features=manifest.num_features,
        # ParameterServer: one seed for every worker, whose batches are shards of one stream.
        seed=hp.seed + (run.workers.index or 0) * run.synchronous,
        image_size=image_size, augmentation=hp.augmentation,
        # A table of typed columns: batches of one tensor per column (strings, NaN for gaps).
        columns=manifest.columns,
    )
    data = _Input(manifest, train_plan, val_plan, inputs, image_size,
                  architectures.resolve(hp.model_architecture, manifest.kind, user_model_file),
                  user_model_file)
    if manifest.columns:
        tabular.check_architecture(data.architecture, manifest.label_column)
    run.log(f"{run.name}: {run.workers.count} worker(s) on {cfg.hosts.count} host(s); train "
            f"{cfg.train.mode}/{cfg.train.distribution}: {train_plan.steps} steps of {hp.batch_size} "
            "per epoch" + (" per worker" if run.synchronous else " over all workers (asynchronous)")
            + f"; model {data.architecture}")
    return data


def _build(run: _Run, cfg, data: _Input):
    """Cut points ``model``, ``optimizer``, ``loss``, ``metrics`` and ``BatchNorm``, under the
    strategy's scope: mirrored variables, or variables on the parameter servers."""
    hp = cfg.hp
    with run.strategy.scope():
        model = _build_model(cfg, data)
        if run.synchronous:
            synced = strategies.synchronize_batch_norm(model)  # MultiWorkerMirrored: SyncBatchNorm
            if synced:
                run.log(f"{synced} BatchNormalization layer(s) synchronised across workers")
        # MultiWorkerMirrored: the rate is set before every call by LearningRateSchedule (base
        # x workers after warm-up). ParameterServer: base, unscaled and without warm-up: each
        # update applies one worker's batch, as in one-process training (docs/strategies.md).
        optimizer = tf.keras.optimizers.legacy.Adam(learning_rate=hp.base_learning_rate)
        # Keras scales each replica's loss by the global batch and reduces the metrics over
        # every worker (mirrored) or keeps them on the parameter servers (asynchronous).
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], steps_per_execution=hp.steps_per_execution)
        run.lean = run.synchronous and run.workers.count > 1 and strategies.lean_steps(run.strategy, model)
        if run.lean:
            run.log("lean steps: one allreduce per step; metrics read across workers once per epoch")
        state, epochs_completed = checkpoints.training_state(model, optimizer)
        if run.coordinated:
            # ParameterServer: the chief's disk holds the checkpoints, not the servers'.
            state = strategies.ChiefCheckpoint(model=model, optimizer=optimizer, epochs_completed=epochs_completed)
    return model, state, epochs_completed


def _build_model(cfg, data: _Input) -> tf.keras.Model:
    manifest = data.manifest
    if manifest.columns:
        # A table of typed columns: its encoding lives inside the model, as under Horovod.
        return tabular.build_tabular_model(manifest.columns, manifest.num_classes)
    return architectures.build(
        data.architecture, num_classes=manifest.num_classes, image_size=data.image_size,
        num_features=manifest.num_features, feature_mean=manifest.feature_mean,
        feature_std=manifest.feature_std, user_model_file=data.user_model_file,
        hyperparameters=dataclasses.asdict(cfg.hp))


def _resume(run: _Run, cfg, model, state, epochs_completed) -> int:
    """Cut point ``checkpoint`` (read): the epochs already done. Every host received the
    checkpoints (SageMaker syncs checkpoint_s3_uri to all)."""
    found = checkpoints.newest(cfg.checkpoint_dir)
    initial_epoch = found.epoch if found is not None else 0
    # MultiWorkerMirrored: the workers must agree, or their collectives would not pair up.
    if run.synchronous and len(set(run.gather(initial_epoch))) != 1:
        raise strategies.StrategyError("the workers found different newest checkpoints in "
                                       f"{cfg.checkpoint_dir}; start with the same checkpoints on every host")
    if found is not None:
        checkpoints.restore(state, found, cfg.checkpoint_dir)
        run.log(f"resuming from {found.path}: {found.epoch} of {cfg.hp.epochs} epochs done")
    elif cfg.init is not None:
        run.log(f"initial weights from {init_weights.load_initial_weights(model, cfg.init.directory, None)}")
    epochs_completed.assign(initial_epoch)
    return initial_epoch


def _fit(run: _Run, cfg, data: _Input, model, state, epochs_completed, initial_epoch: int) -> None:
    """Cut points ``learning rate``, ``gradient aggregation`` (inside fit: allreduce, or each
    worker's update applied on the parameter servers) and ``checkpoint`` (write)."""
    hp, workers, steps = cfg.hp, run.workers, data.train_plan.steps
    # Checkpoints written by the chief alone. MultiWorkerMirrored: saving can read synced
    # variables through collectives, so the other workers save too, into a scratch directory.
    checkpoint_dir = cfg.checkpoint_dir if workers.is_chief else tempfile.mkdtemp(prefix="trainpipe-ckpt-")
    callbacks: list[tf.keras.callbacks.Callback] = [EpochCheckpoint(state, epochs_completed, checkpoint_dir, run.log)]
    if not run.coordinated:
        # MultiWorkerMirrored: base x workers after a linear warm-up, set before every call.
        # ParameterServer: Keras refuses batch hooks there, and the rate stays the optimizer's
        # base (every update is one worker's batch; see _build).
        callbacks += [
            LearningRateSchedule(hp.base_learning_rate, workers.lr_scale, hp.warmup_epochs, steps),
            *injected_failures(workers.index or 0, steps_per_execution=hp.steps_per_execution),
        ]
    if run.lean:
        # MultiWorkerMirrored: the epoch's metrics over every worker, before MetricLine reads them.
        callbacks.append(strategies.WorkerMetrics(steps))
    if workers.is_chief:
        # SageMaker: the metric_definitions regexes read this line. MultiWorkerMirrored: a
        # step is every worker's batch; ParameterServer: one worker's, timed per epoch.
        callbacks.append(strategies.EpochMetricLine(hp.batch_size, steps) if run.coordinated
                         else MetricLine(hp.batch_size * max(workers.count, 1), steps))
    # SageMaker: a stopped job gets SIGTERM and a grace period, then /opt/ml/model is uploaded:
    # training ends at the next epoch end and _export saves what it has. Last, so that the
    # epoch's metric line comes before the line that says training stopped after it.
    stop = StopOnSigterm(_stop_flag_max(run), run.log)
    stop.install()
    callbacks.append(stop)
    val_plan = data.val_plan
    model.fit(
        _dataset(run, data.train_plan, data.inputs, hp.epochs - initial_epoch),
        steps_per_epoch=steps, epochs=hp.epochs, initial_epoch=initial_epoch,
        validation_data=(tf.keras.utils.experimental.DatasetCreator(
            lambda _: datasets.validation_dataset(val_plan, data.inputs)) if val_plan else None),
        validation_steps=val_plan.steps if val_plan else None,
        callbacks=callbacks, verbose=0)
    if not workers.is_chief:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)


def _stop_flag_max(run: _Run):
    """StopOnSigterm's agreement: the largest stop flag of every process that trains."""
    if not run.synchronous:
        # ParameterServer: the chief alone runs fit and its callbacks; the workers run only
        # the steps it schedules, so its own flag decides (its SIGTERM comes with theirs).
        return lambda flag: flag

    # MultiWorkerMirrored: every worker's flag to every worker (one all-gather per epoch, at
    # the same callback on each), so all stop after the same epoch. Traced once: a bare
    # strategy.gather traces a new function at every call (and TensorFlow warns each epoch).
    gathered_max = tf.function(lambda flag: tf.reduce_max(run.strategy.gather(flag, axis=0)))
    return lambda flag: float(gathered_max(tf.constant([flag], tf.float32)))


def _export(run: _Run, cfg, data: _Input, model) -> None:
    """Cut point ``export``: the same SageMaker-serving SavedModel whatever the strategy,
    written by the chief."""
    # MultiWorkerMirrored: saving reads synced variables through collectives, so every worker
    # saves (the others into a scratch directory) and none leaves while the chief needs it.
    chief = run.workers.is_chief
    model_dir = cfg.model_dir if chief else tempfile.mkdtemp(prefix="trainpipe-model-")
    if run.coordinated:
        # ParameterServer: the trained weights into the same model built on the chief alone,
        # so the SavedModel holds plain variables and nothing refers to the cluster.
        weights = model.get_weights()
        model = _build_model(cfg, data)
        model.set_weights(weights)
    manifest = data.manifest
    # A table of typed columns: serving_default (a tensor per column) and serving_csv, as Horovod's.
    signatures = tabular.tabular_signatures(model, manifest.columns, manifest.class_names) if manifest.columns else None
    table = tabular.table_description(manifest.columns, manifest.label_column) if manifest.columns else None
    saved = save_for_serving(model, model_dir, contract.MODEL_VERSION, data.image_size, signatures,
                             manifest.class_names, table)
    run.log(f"saved {saved}")
    if not chief:
        shutil.rmtree(model_dir, ignore_errors=True)


def _user_model_path(model_file: str | None) -> str | None:
    """SageMaker: relative to the bundle's root (/opt/ml/code), as train.py reads it."""
    if not model_file or os.path.isabs(model_file):
        return model_file or None
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), model_file)


def _dataset(run: _Run, plan, inputs: InputContext, epochs: int):
    """Each worker's own batches, never re-sharded or re-batched by Keras."""
    if not run.coordinated:
        # MultiWorkerMirrored (or one host): built in this process from its plan (any input mode).
        return tf.keras.utils.experimental.DatasetCreator(
            lambda _: datasets.training_dataset(plan, inputs, epochs))
    count = run.workers.count

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
