"""TrainModel entry point: data-parallel Keras training with Horovod over MPI.

``main()`` is the canonical Horovod order and nothing else. Lines marked ``# Horovod:`` exist
only for distributed training; lines marked ``# SageMaker:`` depend on the container
contract (``/opt/ml``, ``SM_*``, ``--name value`` arguments).

On SageMaker (TF 2.14 py310 training image), the toolkit runs on the first host, in
/opt/ml/code where the bundle has this file at its root next to the ``training_entry``
package::

    mpirun --host algo-1:4,algo-2:4 -np 8 --allow-run-as-root -bind-to none -map-by slot \\
        -mca orte_abort_on_non_zero_status 1 -x SM_HOSTS -x SM_CURRENT_HOST ... \\
        python -m mpi4py train.py --base-learning-rate 0.001 --batch-size 32 --epochs 10 \\
        --fp16-allreduce False --mixed-precision off --model_dir /opt/ml/model --seed 42 \\
        --warmup-epochs 2

Locally, 2 ranks on this machine against an ``/opt/ml`` tree at /tmp/ml (input/config/
inputdataconfig.json and channels train, validation, manifest under input/data)::

    SAGEMAKER_BASE_DIR=/tmp/ml TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 \\
    mpirun --allow-run-as-root --oversubscribe -np 2 -bind-to none \\
        -mca orte_abort_on_non_zero_status 1 \\
        -x SAGEMAKER_BASE_DIR -x TF_NUM_INTRAOP_THREADS -x TF_NUM_INTEROP_THREADS \\
        .venv/bin/python training_entry/train.py --epochs 3 --batch-size 32

Writes (rank 0 only): ``model/1`` (SavedModel, softmax probabilities; serving input ``x``),
``checkpoints/epoch-NNNNNN`` every epoch, and one ``trainpipe-metrics epoch=N ...`` line
per epoch on stdout. Any failing rank writes ``output/failure`` and exits non-zero, which
makes mpirun stop the others. A job started again with the same checkpoint directory
resumes after its last completed epoch.
"""

from __future__ import annotations

import os
import secrets
import sys

import horovod.tensorflow.keras as hvd
import tensorflow as tf
from horovod.tensorflow import allgather_object, broadcast_object, broadcast_variables

from training_entry import checkpoints, config, contract, data, failure, init_weights, runtime
from training_entry.callbacks import EpochCheckpoint, LearningRateSchedule, MetricLine
from training_entry.fault_injection import injected_failures
from training_entry.model import build_model, save_for_serving


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    # Horovod: initialize; one process per GPU (per slot on CPU), all started by mpirun.
    hvd.init()
    # Horovod: pin this process to the GPU of its local rank (CPU when there is none).
    runtime.pin_gpu(hvd.local_rank())
    runtime.set_threads_from_env()
    # Horovod: rank 0 alone writes the model, the checkpoints and the metric lines.
    chief = hvd.rank() == 0
    log = runtime.Log(chief)

    # SageMaker: hyperparameters from --name value; channels, hosts, paths from SM_* / config.
    cfg = config.load(argv)
    hp = cfg.hp
    for notice in cfg.notices:
        log(notice)
    tf.keras.utils.set_random_seed(hp.seed)
    runtime.set_precision_policy(hp.mixed_precision)

    # Horovod: where each rank sits among the SageMaker hosts decides the shards it reads;
    # every rank derives the same plan (and steps per epoch) from the manifest.
    layout = data.layout_from_peers(cfg.hosts, hvd.rank(), allgather_object(cfg.hosts.current))
    manifest = data.load_manifest(cfg.manifest, cfg.train.name)
    train_plan = data.plan_channel(cfg.train, manifest, layout, hp.batch_size)
    val_plan = None
    if cfg.validation is not None:
        val_manifest = data.load_manifest(cfg.manifest, cfg.validation.name)
        val_plan = data.plan_channel(cfg.validation, val_manifest, layout, hp.batch_size)
    # Horovod: one id for the job, naming the directory where a host's local rank 0 hands
    # the other local ranks their share of a Pipe stream.
    run_id = broadcast_object(secrets.token_hex(6), root_rank=0)
    inputs = data.InputContext(
        hosts=cfg.hosts,
        fifo_dir=cfg.fifo_dir,
        config_dir=cfg.config_dir,
        private_dir=data.private_pipe_dir(run_id, cfg.hosts.current),
        num_features=manifest.num_features,
        seed=hp.seed + hvd.rank(),  # Horovod: each rank shuffles its records differently
    )

    model = build_model(
        manifest.num_features, manifest.num_classes, manifest.feature_mean, manifest.feature_std
    )
    # Horovod: Keras 2 legacy optimizer (DistributedOptimizer does not support the new ones);
    # its rate is set every step by LearningRateSchedule (base x hvd.size() after warm-up).
    optimizer = tf.keras.optimizers.legacy.Adam(learning_rate=hp.base_learning_rate)
    # Horovod: average the gradients over all ranks, optionally sent as float16.
    optimizer = hvd.DistributedOptimizer(
        optimizer, compression=hvd.Compression.fp16 if hp.fp16_allreduce else hvd.Compression.none
    )
    if hp.mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling. The scaler wraps the Horovod
        # optimizer, so it unscales and checks allreduced gradients: every rank sees the
        # same inf/nan and skips the same steps.
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    state, epochs_completed = checkpoints.training_state(model, optimizer)

    # Resume: rank 0 restores the newest complete checkpoint (else the init channel's
    # weights); all ranks agree on where training starts.
    initial_epoch = 0
    if chief:
        found = checkpoints.newest(cfg.checkpoint_dir)
        if found is not None:
            checkpoints.restore(state, found, cfg.checkpoint_dir)
            initial_epoch = found.epoch
            log(f"resuming from {found.path}: {found.epoch} of {hp.epochs} epochs done")
        elif cfg.init is not None:
            log(f"initial weights from {init_weights.load_initial_weights(model, cfg.init.directory)}")
    # Horovod: every rank starts at rank 0's epoch, weights and optimizer state.
    initial_epoch = broadcast_object(initial_epoch, root_rank=0)
    broadcast_variables(checkpoints.state_variables(state, optimizer), root_rank=0)

    log(
        f"{hvd.size()} ranks ({cfg.hosts.count} host(s) x {layout.local_size}); "
        f"train {cfg.train.mode}/{cfg.train.distribution}: {train_plan.steps} steps of "
        f"{hp.batch_size} per rank per epoch"
        + (f"; validation {val_plan.steps} steps" if val_plan else "")
        + f"; epochs {initial_epoch + 1}..{hp.epochs}"
        + (f"; Pipe reader: {data.pipe_reader_name(train_plan)}" if cfg.train.is_pipe else "")
    )
    callbacks = [
        # Horovod: rank 0's variables to all ranks after the first step (also covered above).
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: average the epoch's metrics over ranks before anything logs them.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: base x hvd.size() with linear warm-up, from the global epoch.
        LearningRateSchedule(hp.base_learning_rate, hvd.size(), hp.warmup_epochs, train_plan.steps),
        *injected_failures(hvd.rank()),  # tests only: off unless its variable is set
    ]
    if chief:
        callbacks += [
            # SageMaker: /opt/ml/checkpoints is synced to checkpoint_s3_uri.
            EpochCheckpoint(state, epochs_completed, cfg.checkpoint_dir, log),
            # SageMaker: the metric_definitions regexes read this line.
            MetricLine(hp.batch_size * hvd.size(), train_plan.steps),
        ]
    if initial_epoch < hp.epochs:
        model.fit(
            data.training_dataset(train_plan, inputs, hp.epochs - initial_epoch),
            steps_per_epoch=train_plan.steps,
            epochs=hp.epochs,
            initial_epoch=initial_epoch,
            validation_data=data.validation_dataset(val_plan, inputs) if val_plan else None,
            validation_steps=val_plan.steps if val_plan else None,
            callbacks=callbacks,
            verbose=0,
        )

    if chief:
        # SageMaker: /opt/ml/model is packed into model.tar.gz; TF Serving loads model/1.
        log(f"saved {save_for_serving(model, cfg.model_dir, contract.MODEL_VERSION)}")
    if layout.local_rank == 0:
        inputs.cleanup()


def _where() -> str:
    """Which rank failed, for the failure file."""
    try:
        host = config.load_hosts(os.environ).current
    except Exception:  # the failure may be a broken host config itself
        host = os.environ.get("SM_CURRENT_HOST", "")
    if hvd.is_initialized():
        return f"rank {hvd.rank()} of {hvd.size()}{' on ' + host if host else ''}"
    return host


if __name__ == "__main__":
    # SageMaker: a failing rank writes output/failure (the job's FailureReason) and exits
    # non-zero; mpirun's orte_abort_on_non_zero_status then stops the other ranks.
    failure.run_and_report(main, where=_where)
