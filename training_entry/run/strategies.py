"""TensorFlow's own distribution strategies beside Horovod: what each one needs at every cut
point of training (who trains, which data, under which scope, what rate, who writes).

SageMaker: the TensorFlow toolkit writes ``TF_CONFIG`` (pipeline/local/hosts/tf_config.py has
the same logic) and runs this script once per host:

- MultiWorkerMirrored (``mirrored``): every host is a ``worker``; synchronous all-reduce of
  the gradients each step (ring/NCCL collectives), one replica per process on CPU.
- ParameterServer (``parameter_server``): the first host is ``master``, the others
  ``worker``; every host also runs a ``ps`` server the toolkit starts itself. TF 2 names the
  coordinating task ``chief`` and refuses ``master`` (multi_worker_util allows chief, worker,
  evaluator, ps), so the cluster is read with ``master`` renamed. The chief coordinates
  (``ClusterCoordinator``, through ``model.fit``) and reads no data; the workers only serve
  (``tf.distribute.Server``) the steps it schedules on them, asynchronously: each step reads
  the variables from the parameter servers and applies its own gradients there.

Lines that exist only for one strategy carry ``# MultiWorkerMirrored:`` or
``# ParameterServer:``, as Horovod's carry ``# Horovod:``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from dataclasses import dataclass

import tensorflow as tf

from training_entry import contract
from training_entry.failure import UserError
from training_entry.run.callbacks import MetricLine

TF_CONFIG_ENV = "TF_CONFIG"
# MultiWorkerMirrored: "0" keeps Keras's own training step (every metric read across the
# workers at every step); anything else, or unset, the lean step (``lean_steps``).
LEAN_STEP_ENV = "TRAINPIPE_MIRRORED_LEAN_STEP"
# How long a parameter-server worker waits for the chief to come up before giving up.
CHIEF_START_TIMEOUT = 600.0


class StrategyError(UserError):
    """TF_CONFIG is missing or does not describe the chosen strategy's cluster."""


def chosen(argv: list[str]) -> str:
    """The strategy named by the hyperparameters (before anything else is parsed: Horovod
    must not be initialised for the others)."""
    flag = f"--{contract.HP_DISTRIBUTION}"
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return contract.STRATEGY_HOROVOD


def read_tf_config(env=None) -> dict | None:
    raw = (os.environ if env is None else env).get(TF_CONFIG_ENV)
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as error:
        raise StrategyError(f"{TF_CONFIG_ENV} is not JSON ({error}): {raw[:200]}") from None


def tf2_cluster(tf_config: dict) -> tuple[dict, str, int]:
    """(cluster, task type, task index) with the toolkit's ``master`` renamed ``chief``."""
    # ParameterServer: TF 2 refuses a "master" job; it is the chief (the coordinator).
    rename = {"master": "chief"}
    cluster = {rename.get(job, job): list(addresses) for job, addresses in tf_config["cluster"].items()}
    task = tf_config.get("task") or {}
    return cluster, rename.get(task.get("type"), task.get("type")), int(task.get("index", 0))


@dataclass
class Workers:
    """Who trains: ``count`` processes computing gradients, this one's ``index`` among them
    (None: the parameter-server chief, which computes none), and whether it is the chief."""

    count: int
    index: int | None
    is_chief: bool
    # The LearningRateSchedule's multiplier: the number of workers whose batches make one
    # update (synchronous), or 1 (asynchronous: every update is one worker's batch).
    lr_scale: int


def mirrored(tf_config: dict | None) -> tuple[tf.distribute.Strategy, Workers]:
    """MultiWorkerMirrored: the strategy, created before any other TensorFlow operation."""
    if tf_config is None:
        # One host: the toolkit writes TF_CONFIG all the same; a bare local run has none.
        return tf.distribute.MultiWorkerMirroredStrategy(), Workers(1, 0, True, 1)
    cluster, task_type, index = tf2_cluster(tf_config)
    if task_type != "worker" or "worker" not in cluster:
        raise StrategyError(f"{TF_CONFIG_ENV} task {tf_config.get('task')} is not a worker of a "
                            f"multi-worker mirrored cluster {tf_config.get('cluster')}")
    # MultiWorkerMirrored: collectives over gRPC between the hosts' single processes.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    count = len(cluster["worker"])
    # MultiWorkerMirrored: worker 0 is the chief when the cluster has no "chief" task.
    return strategy, Workers(count, index, index == 0, count)


def parameter_server(tf_config: dict) -> tuple[tf.distribute.Strategy, Workers]:
    """ParameterServer, on the chief: the strategy over the cluster the toolkit described."""
    cluster, task_type, _ = tf2_cluster(tf_config)
    if task_type != "chief" or "ps" not in cluster or "worker" not in cluster:
        raise StrategyError(f"{TF_CONFIG_ENV} task {tf_config.get('task')} is not the chief of a "
                            f"parameter-server cluster {tf_config.get('cluster')}")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    # ParameterServer: variables spread over the ps tasks; steps scheduled on the workers.
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    # ParameterServer: asynchronous, so the rate is not scaled by the workers (see lr_scale).
    return strategy, Workers(len(cluster["worker"]), None, True, 1)


def serve_as_worker(tf_config: dict, log) -> None:
    """ParameterServer, on a worker host: serve the chief's steps until the chief is gone,
    then return (the toolkit's _wait_until_master_is_down, for the worker itself)."""
    cluster, task_type, index = tf2_cluster(tf_config)
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=task_type,
                                  task_index=index, protocol="grpc", start=True)
    log(f"parameter-server worker {index}: serving at {server.target}")
    chief = cluster["chief"][0]
    deadline = time.monotonic() + CHIEF_START_TIMEOUT
    while not _reachable(chief):
        if time.monotonic() > deadline:
            raise StrategyError(f"the chief {chief} did not come up in {CHIEF_START_TIMEOUT:.0f}s")
        time.sleep(0.5)
    while _reachable(chief):
        time.sleep(0.5)
    log(f"parameter-server worker {index}: the chief {chief} is gone; done")


def _reachable(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except OSError:
        return False


def lean_steps(strategy: tf.distribute.Strategy, model: tf.keras.Model, env=None) -> bool:
    """MultiWorkerMirrored: one collective per training step (the gradients' allreduce), not
    four. Keras's own step also agrees with the other workers on whether each worker still
    has a batch (an allreduce per step), reads every metric across the workers (a merge_call
    per step: one allreduce per metric variable) and sums the step's outputs (one more); over
    gRPC each costs about a millisecond, more than the digits MLP's step itself
    (benchmarks/training/strategies.py). Here every worker runs exactly the plan's steps from a
    dataset that never runs short, so the agreement is not needed; the metrics' state is
    updated every step and read across the workers once per epoch (``WorkerMetrics``). A
    model with its own ``train_step`` (a subclassed user model) keeps it. Set before fit;
    True when the step was replaced (then add ``WorkerMetrics``)."""
    if (os.environ if env is None else env).get(LEAN_STEP_ENV, "1") == "0":
        return False
    # MultiWorkerMirrored: no per-step allreduce of "has a batch" (every worker has one).
    strategy.extended.experimental_enable_get_next_as_optional = False
    if type(model).train_step is not tf.keras.Model.train_step:
        return False  # its own step reads its metrics as it chooses
    # MultiWorkerMirrored: the step's outputs are the first worker's, not summed by a collective.
    model.distribute_reduction_method = "first"
    model.train_step = functools.partial(_lean_train_step, model)
    return True


def _lean_train_step(model: tf.keras.Model, data) -> dict:
    """Keras's ``Model.train_step`` without reading the metrics: their state is updated (loss
    included, by compute_loss) and ``WorkerMetrics`` reads it once per epoch."""
    x, y, sample_weight = tf.keras.utils.unpack_x_y_sample_weight(data)
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x, y, y_pred, sample_weight)
    model.optimizer.minimize(loss, model.trainable_variables, tape=tape)
    model.compiled_metrics.update_state(y, y_pred, sample_weight)
    return {"loss": loss}  # this worker's batch (Keras needs an output); the epoch's come later


class WorkerMetrics(tf.keras.callbacks.Callback):
    """MultiWorkerMirrored, with ``lean_steps``: the training metrics over every worker, read
    once per epoch after its last step (collectives: every worker runs this callback, at the
    same step) and put into the epoch's logs before the callbacks after it (MetricLine) see
    them. Read before validation, which resets the metrics."""

    def __init__(self, steps_per_epoch: int):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self.values: dict[str, float] = {}

    def on_epoch_begin(self, epoch, logs=None):
        self.values = {}

    def on_train_batch_end(self, batch, logs=None):
        # ``batch``: the index of the call's last step (steps_per_execution runs several).
        if batch >= self.steps_per_epoch - 1:
            self.values = {m.name: float(m.result()) for m in self.model.metrics}

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs.update(self.values)


def synchronize_batch_norm(model: tf.keras.Model) -> int:
    """MultiWorkerMirrored: BatchNormalization layers compute their batch statistics over
    every worker's batch (SyncBatchNorm); the number of layers switched. Set before the
    first call traces them."""
    count = 0
    for layer in _layers(model):
        if isinstance(layer, tf.keras.layers.BatchNormalization) and hasattr(layer, "synchronized"):
            layer.synchronized = True
            count += 1
    return count


def _layers(model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, tf.keras.Model):
            yield from _layers(layer)


# ParameterServer: the chief's own filesystem. Without it each parameter server would write
# (and read) its variables' part of a checkpoint on its own host's disk.
CHIEF_DEVICE = "/job:chief/replica:0/task:0/device:CPU:0"


class ChiefCheckpoint(tf.train.Checkpoint):
    """ParameterServer: a checkpoint whose files the chief reads and writes, whichever
    parameter server holds the variables. SageMaker: every host's /opt/ml/checkpoints is its
    own; the chief's is the one the job resumes from."""

    def write(self, file_prefix, options=None):
        return super().write(file_prefix, options=options or _chief_io())

    def read(self, save_path, options=None):
        return super().read(save_path, options=options or _chief_io())


def _chief_io() -> tf.train.CheckpointOptions:
    return tf.train.CheckpointOptions(experimental_io_device=CHIEF_DEVICE)


class EpochMetricLine(MetricLine):
    """ParameterServer: the metric line from epoch hooks alone. Keras refuses batch hooks
    with a ClusterCoordinator (each would wait for the scheduled steps), so an epoch's time
    runs from its start to the coordinator's join at its end, ``step_spread`` is not
    measured (no per-call times) and ``cpu_time`` is the chief's, which schedules the steps."""

    # ParameterServer: Keras's own no-op (marked default), so that Keras sees no batch hook.
    on_train_batch_end = tf.keras.callbacks.Callback.on_train_batch_end

    def on_epoch_end(self, epoch, logs=None):
        self.trained = time.perf_counter()
        self.cpu_trained = time.process_time()
        super().on_epoch_end(epoch, logs)


def allgather_object(strategy: tf.distribute.Strategy, obj) -> list:
    """MultiWorkerMirrored: every worker's ``obj`` (JSON-able) to every worker, in worker
    order: two all-gathers (lengths, then the padded bytes)."""
    payload = json.dumps(obj).encode()
    length = tf.constant([len(payload)], tf.int64)
    lengths = strategy.gather(length, axis=0).numpy().tolist()
    padded = tf.constant([list(payload.ljust(max(lengths), b" "))], tf.int32)  # no uint8 collectives
    blobs = strategy.gather(padded, axis=0).numpy()
    return [json.loads(bytes(blob[:n].tolist()).decode()) for blob, n in zip(blobs, lengths, strict=True)]
