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
        --steps-per-execution 16 --warmup-epochs 2

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

import dataclasses
import os
import secrets
import sys

import horovod.tensorflow.keras as hvd
import tensorflow as tf
from horovod.tensorflow import (
    Max,
    allgather_object,
    allreduce,
    broadcast_object,
    broadcast_variables,
)

from training_entry import config, contract, failure, strategy_train, tracking
from training_entry.input import datasets, pipe_source, records
from training_entry.input.context import InputContext
from training_entry.input.plan import layout_from_peers, load_manifest, plan_channel
from training_entry.model import architectures, efficientnet_lite0, init_weights, tabular, transfer
from training_entry.model.network import save_for_serving
from training_entry.run import checkpoints, flat_allreduce, runtime, strategies
from training_entry.run.callbacks import (
    EpochCheckpoint,
    LearningRateSchedule,
    MetricLine,
    StopOnSigterm,
)
from training_entry.run.fault_injection import injected_failures


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    # ParameterServer: / MultiWorkerMirrored: TensorFlow's strategies (--distribution) run
    # their own order (strategy_train.py); everything below is Horovod's.
    if strategies.chosen(argv) != contract.STRATEGY_HOROVOD:
        return strategy_train.main(argv)
    # Horovod: initialize; one process per GPU (per slot on CPU), all started by mpirun.
    hvd.init()
    # Horovod: pin this process to the GPU of its local rank (CPU when there is none).
    runtime.pin_gpu(hvd.local_rank())
    # Horovod: rank 0 alone writes the model, the checkpoints and the metric lines.
    chief = hvd.rank() == 0
    log = runtime.Log(chief)

    # SageMaker: hyperparameters from --name value; channels, hosts, paths from SM_* / config.
    cfg = config.load(argv)
    hp = cfg.hp
    # The data's kind (manifest) and ModelArchitecture decide the model and the record map;
    # known before TensorFlow starts, so that the model can choose the threads.
    manifest = load_manifest(cfg.manifest, cfg.train.name)
    user_model_file = _user_model_path(hp.model_file)
    architecture = architectures.resolve(hp.model_architecture, manifest.kind, user_model_file)
    threads_note = runtime.small_step_threads(architecture)
    runtime.set_threads_from_env()
    for notice in (*cfg.notices, threads_note):
        if notice:
            log(notice)
    tf.keras.utils.set_random_seed(hp.seed)
    runtime.set_precision_policy(hp.mixed_precision)

    # Horovod: where each rank sits among the SageMaker hosts decides the shards it reads;
    # every rank derives the same steps per epoch (from the manifest, and under
    # ShardedByS3Key from what the hosts hold, agreed through an allgather).
    layout = layout_from_peers(cfg.hosts, hvd.rank(), allgather_object(cfg.hosts.current))
    train_plan = plan_channel(cfg.train, manifest, layout, hp.batch_size, gather=allgather_object)
    val_plan = None
    if cfg.validation is not None:
        val_manifest = load_manifest(cfg.manifest, cfg.validation.name)
        val_plan = plan_channel(cfg.validation, val_manifest, layout, hp.batch_size,
                                gather=allgather_object)
    # Horovod: one id for the job, naming the directory where a host's local rank 0 hands
    # the other local ranks their share of a Pipe stream.
    run_id = broadcast_object(secrets.token_hex(6), root_rank=0)
    image_size = hp.image_size if manifest.kind == records.KIND_IMAGE else None
    inputs = InputContext(
        hosts=cfg.hosts,
        fifo_dir=cfg.fifo_dir,
        config_dir=cfg.config_dir,
        private_dir=pipe_source.private_pipe_dir(run_id, cfg.hosts.current),
        num_features=manifest.num_features,
        seed=hp.seed + hvd.rank(),  # Horovod: each rank shuffles its records differently
        image_size=image_size,
        augmentation=hp.augmentation,
        columns=manifest.columns,
    )

    # A table of typed columns: its encoding lives inside the model (training_entry/model/tabular.py).
    if manifest.columns:
        tabular.check_architecture(architecture, manifest.label_column)
    model = tabular.build_tabular_model(manifest.columns, manifest.num_classes) if manifest.columns else architectures.build(
        architecture,
        num_classes=manifest.num_classes,
        image_size=image_size,
        num_features=manifest.num_features,
        feature_mean=manifest.feature_mean,
        feature_std=manifest.feature_std,
        user_model_file=user_model_file,
        hyperparameters=dataclasses.asdict(hp),
    )
    backbone = architectures.backbone_of(model)
    # Transfer learning: head only (backbone frozen), then the top of the backbone at a lower
    # rate; each phase is a (re)compile and a model.fit. Other models: one phase.
    # efficientnet_lite0 without an init channel starts from the installed package's state dict
    # (its requirements.txt), as the PyTorch room does; either way it logs that room's line.
    package_weights, weights_line = (efficientnet_lite0.job_weights(cfg.init.directory if cfg.init else None)
                                     if architecture == efficientnet_lite0.ARCHITECTURE else (None, None))
    pretrained = cfg.init is not None or package_weights is not None
    phases = transfer.phases(model, hp, pretrained=pretrained)
    # MLflow: the chief logs this job's run itself on SageMaker (--tracking-uri); else None.
    job_run = tracking.JobRun.start(dataclasses.asdict(hp)) if chief else None
    if weights_line:
        log(weights_line)
    if backbone is not None and not pretrained:
        log(f"{architecture} without pretrained weights (no init channel): the whole network trains "
            f"from random weights; for ImageNet weights run `trainpipe init-weights` where there is "
            f"internet and build with --init-model-uri")

    # Resume: rank 0 finds the newest complete checkpoint; all ranks agree on where training
    # starts, hence in which phase.
    found = checkpoints.newest(cfg.checkpoint_dir) if chief else None
    initial_epoch = found.epoch if found is not None else 0
    # Horovod: every rank starts at rank 0's epoch.
    initial_epoch = broadcast_object(initial_epoch, root_rank=0)
    # Every rank says what it reads: equal step counts on all of them is the no-deadlock rule.
    print(f"rank {hvd.rank()} on {cfg.hosts.current}: {train_plan.steps} train steps per epoch "
          f"from {len(train_plan.my_shards) or 'its share of the'} shard(s)"
          + (" (records split among the host's ranks)" if train_plan.split_records else ""),
          flush=True)
    log(
        f"{hvd.size()} ranks ({cfg.hosts.count} host(s) x {layout.local_size}); "
        f"train {cfg.train.mode}/{cfg.train.distribution}: {train_plan.steps} steps of "
        f"{hp.batch_size} per rank per epoch"
        + (f"; validation {val_plan.steps} steps" if val_plan else "")
        + f"; epochs {initial_epoch + 1}..{hp.epochs}"
        + (f"; Pipe reader: {pipe_source.pipe_reader_name(train_plan)}" if cfg.train.is_pipe else "")
        + f"; model {architecture}"
        + (f" on {image_size}x{image_size} images" if image_size else "")
    )

    # SageMaker: a stopped job gets SIGTERM and a grace period, then /opt/ml/model is uploaded:
    # training ends at the next epoch end and rank 0 saves what it has (below).
    stop = StopOnSigterm(_allreduce_max, log)
    stop.install()

    # All epochs done (a re-run after the last checkpoint): the last phase, to restore and save.
    first_phase = min(transfer.phase_at(phases, initial_epoch), len(phases) - 1)
    for index in range(first_phase, len(phases)):
        phase = phases[index]
        log(f"phase {phase.name}, epochs {max(initial_epoch, phase.first_epoch) + 1}..{phase.end_epoch}: "
            f"{transfer.set_trainable(model, phase, hp.fine_tune_layers)}")
        optimizer, reducer = _optimizer(hp)
        # steps_per_execution: a small model's step is mostly Keras' Python dispatch; run that
        # many steps per call into the graph (each step still allreduces its gradients).
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      steps_per_execution=hp.steps_per_execution)
        state, epochs_completed = checkpoints.training_state(model, optimizer)
        if index == first_phase and chief:
            if found is not None:
                # A checkpoint from the end of the previous phase carries that phase's
                # optimizer: take its weights, start this phase's optimizer fresh.
                checkpoints.restore(state, found, cfg.checkpoint_dir,
                                    weights_only=found.epoch == phase.first_epoch > 0)
                log(f"resuming from {found.path}: {found.epoch} of {hp.epochs} epochs done")
            elif cfg.init is not None:
                loaded = init_weights.load_initial_weights(model, cfg.init.directory, backbone)
                log(f"initial weights from {loaded}")
            elif package_weights is not None:
                count = efficientnet_lite0.load_state_dict_file(backbone, package_weights)
                log(f"initial weights from {package_weights} ({count} arrays)")
        epochs_completed.assign(max(initial_epoch, phase.first_epoch))
        # Horovod: every rank starts the phase at rank 0's weights and optimizer state (again
        # after each compile: the new optimizer's slots exist only now).
        broadcast_variables(checkpoints.state_variables(state, optimizer), root_rank=0)
        if index == first_phase and backbone is not None:
            _report_start_weights(backbone, log)

        callbacks = [
            # Horovod: rank 0's variables to all ranks after the first call (already done above).
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            # Horovod: average the epoch's metrics over ranks before anything logs them.
            hvd.callbacks.MetricAverageCallback(),
            # Horovod: base x hvd.size() with linear warm-up, from the global epoch (x the
            # phase's factor: lower while fine-tuning the backbone).
            LearningRateSchedule(hp.base_learning_rate, hvd.size(), hp.warmup_epochs, train_plan.steps,
                                 factor=phase.lr_factor),
            *injected_failures(hvd.rank(), steps_per_execution=hp.steps_per_execution),  # tests only: off unless its variable is set
        ]
        if chief:
            callbacks += [
                # SageMaker: /opt/ml/checkpoints is synced to checkpoint_s3_uri.
                EpochCheckpoint(state, epochs_completed, cfg.checkpoint_dir, log),
                # SageMaker: the metric_definitions regexes read this line.
                MetricLine(hp.batch_size * hvd.size(), train_plan.steps, reducer=reducer,
                           tracking=job_run),
            ]
        # Last on every rank: the epoch's metric line comes before the line that says
        # training stopped after that epoch (issue 49: the two read as different epochs).
        callbacks.append(stop)
        start = max(initial_epoch, phase.first_epoch)
        if start >= phase.end_epoch:
            continue
        model.fit(
            datasets.training_dataset(train_plan, inputs, phase.end_epoch - start),
            steps_per_epoch=train_plan.steps,
            epochs=phase.end_epoch,
            initial_epoch=start,
            validation_data=datasets.validation_dataset(val_plan, inputs) if val_plan else None,
            validation_steps=val_plan.steps if val_plan else None,
            callbacks=callbacks,
            verbose=0,
        )
        if stop.stopped_after is not None:
            break  # no later phase: save now, within the grace period

    if job_run is not None:
        job_run.end()
    if chief:
        # SageMaker: /opt/ml/model is packed into model.tar.gz; TF Serving loads model/1.
        signatures = (tabular.tabular_signatures(model, manifest.columns, manifest.class_names)
                      if manifest.columns else None)
        table = tabular.table_description(manifest.columns, manifest.label_column) if manifest.columns else None
        log(f"saved {save_for_serving(model, cfg.model_dir, contract.MODEL_VERSION, image_size, signatures, manifest.class_names, table)}")
    if layout.local_rank == 0:
        inputs.cleanup()


def _allreduce_max(flag: float) -> float:
    # Horovod: every rank's stop flag, the largest to all (a named collective, once per epoch).
    return float(allreduce(tf.constant(flag, tf.float32), op=Max, name="trainpipe_stop_flag"))


def _optimizer(hp: config.Hyperparameters):
    """(optimizer, the flat allreduce hook or None)."""
    # Horovod: Keras 2 legacy optimizer (DistributedOptimizer does not support the new ones);
    # its rate is set before every call by LearningRateSchedule (base x hvd.size() after warm-up).
    optimizer = tf.keras.optimizers.legacy.Adam(learning_rate=hp.base_learning_rate)
    compression = hvd.Compression.fp16 if hp.fp16_allreduce else hvd.Compression.none
    # Horovod: average the gradients over all ranks, optionally sent as float16.
    optimizer = hvd.DistributedOptimizer(optimizer, compression=compression)
    # Horovod: a small model's gradients as one allreduce, not one per tensor (Horovod's
    # per-operation cost was a large part of a small step); large or sparse ones as before.
    reducer = flat_allreduce.install(optimizer, compression) if flat_allreduce.enabled() else None
    if hp.mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling. The scaler wraps the Horovod
        # optimizer, so it unscales and checks allreduced gradients: every rank sees the
        # same inf/nan and skips the same steps.
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer, reducer


def _user_model_path(model_file: str | None) -> str | None:
    """SageMaker: the user's model file ships in the bundle, relative to its root (where
    train.py sits, /opt/ml/code); an absolute path is taken as it is (local tests)."""
    if not model_file:
        return None
    if os.path.isabs(model_file):
        return model_file
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), model_file)


def _report_start_weights(backbone, log) -> None:
    """The backbone's weights at step 0, after the broadcast: one digest, the same on every
    rank (else the broadcast failed), printed so a run shows which weights it started from."""
    # Horovod: every rank's digest to every rank.
    digests = allgather_object(transfer.weights_digest(backbone))
    if len(set(digests)) != 1:
        raise RuntimeError(f"backbone weights differ between ranks after the broadcast: {digests}")
    log(f"backbone weights at step 0: sha256 {digests[0]} on all {len(digests)} ranks")


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
