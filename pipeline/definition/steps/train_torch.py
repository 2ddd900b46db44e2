"""TrainModel with ``-p Framework=pytorch``: the PyTorch room (``training_torch/train.py``) under
torchrun on every host, on AWS's PyTorch training image, ``Strategy`` picking how the ranks share
the work (DDP, DeepSpeed ZeRO 1-3, GPipe). The channels, the hyperparameters that mean the same
thing, and the steps around it are the TensorFlow pipeline's.

What the PyTorch room does not do yet is refused here, before any step, in one line each
(``check``). ``ModelArchitecture=efficientnet_lite0`` fine-tunes ImageNet weights: from the
init channel where the build has ``--init-model-uri`` (``steps/train.py`` adds the channel for
both rooms; ``trainpipe init-weights --architecture efficientnet_lite0`` fills it), else from
the package the training bundle's requirements.txt installs (``bundles.py``)."""

from __future__ import annotations

from sagemaker.pytorch import PyTorch

from pipeline.definition import parameters as P
from pipeline.definition import torch_images
from pipeline.definition.bundles import SOURCEDIR_ARCHIVE
from pipeline.definition.steps.context import BuildContext
from pipeline.errors import UserError
from pipeline.settings import Settings
from training_entry import contract as training
from training_torch import plan

# SageMaker: the toolkit's torchrun runner starts this many workers per host where the
# hyperparameter is set (else one per GPU); the local runner reads it the same way.
PROCESSES_PER_HOST_HYPERPARAMETER = "sagemaker_mpi_num_of_processes_per_host"


def _refuse(what: str, fix: str) -> UserError:
    return UserError(f"{what} with -p {P.FRAMEWORK}={training.FRAMEWORK_PYTORCH}: {fix}")


def check(settings: Settings, values) -> None:
    """Refuse, in one line, what the PyTorch pipeline cannot run (values: the resolved parameters)."""
    if settings.distribution != training.STRATEGY_HOROVOD:
        raise _refuse(f"--distribution {settings.distribution}", f"that is TensorFlow's strategy; PyTorch's is "
                      f"-p {P.STRATEGY}={'|'.join(training.TORCH_STRATEGIES)}")
    unsupported = [(settings.model_file, "--model-file", "a model file is a Keras build_model(); drop it"),
                   (settings.mixed_precision != "off", "--mixed-precision", "drop it"),
                   (settings.fp16_allreduce, "--fp16-allreduce", "a Horovod setting; drop it")]
    for present, flag, fix in unsupported:
        if present:
            raise _refuse(flag, fix)
    if values[P.TRAIN_INPUT_MODE] == "Pipe" and values[P.STRATEGY] == training.TORCH_GPIPE:
        # GPipe: a host's ranks (the stages) all need every batch; a FIFO is read by one process.
        raise _refuse(f"{P.TRAIN_INPUT_MODE}=Pipe with {P.STRATEGY}={training.TORCH_GPIPE}", f"a Pipe FIFO is "
                      f"read by one process, which deals its records out, and GPipe's stages all need every "
                      f"batch; pass -p {P.TRAIN_INPUT_MODE}=File or FastFile, or -p {P.STRATEGY}=ddp")
    if settings.tune_jobs and values[P.STRATEGY] == training.TORCH_GPIPE:
        # GPipe: the tuned batch sizes (16 to 256) mostly do not split into MicroBatches equal parts.
        raise _refuse(f"--tune with {P.STRATEGY}={training.TORCH_GPIPE}", f"the tuned {P.BATCH_SIZE} "
                      f"must split into {P.MICRO_BATCHES} equal micro-batches, which a tuning range does "
                      f"not keep; tune with -p {P.STRATEGY}=ddp or a ZeRO stage, or drop --tune")
    architecture = str(values[P.MODEL_ARCHITECTURE])
    if architecture not in plan.ARCHITECTURES:
        raise _refuse(f"{P.MODEL_ARCHITECTURE}={architecture}", f"the PyTorch room builds "
                      f"{', '.join(plan.ARCHITECTURES)}; train {architecture} with the TensorFlow pipeline "
                      f"(-p {P.FRAMEWORK}={training.FRAMEWORK_TENSORFLOW})")
    if settings.init_model_uri and architecture not in plan.PRETRAINED_ARCHITECTURES:
        # The init channel holds a pretrained backbone's weights; the room's other networks start random.
        raise _refuse(f"--init-model-uri with {P.MODEL_ARCHITECTURE}={architecture}", f"the PyTorch room reads "
                      f"an init channel for {', '.join(plan.PRETRAINED_ARCHITECTURES)} only; drop it")
    strategy, per_host = values[P.STRATEGY], int(values[P.PROCESSES_PER_HOST])
    try:
        plan.check_pretrained(architecture, strategy, name=P.STRATEGY)
        if strategy in training.TORCH_ZERO:
            plan.check_zero(strategy, P.world_size(values))
        if strategy == training.TORCH_GPIPE:
            plan.check_gpipe(per_host, int(values[P.BATCH_SIZE]), int(values[P.MICRO_BATCHES]),
                             names=(P.BATCH_SIZE, P.MICRO_BATCHES))
            plan.check_stages(str(values[P.MODEL_ARCHITECTURE]), per_host)
    except ValueError as error:
        raise UserError(f"-p {P.STRATEGY}={strategy}: {error}") from None


def estimator(ctx: BuildContext) -> PyTorch:

    settings, params = ctx.settings, ctx.params
    check(settings, ctx.values)
    bundle = ctx.bundles["training_zero" if ctx.values[P.STRATEGY] in training.TORCH_ZERO else "training_torch"]
    return PyTorch(
        entry_point=training.ENTRY_POINT,
        source_dir=f"s3://{settings.bucket}/{bundle.key_prefix(settings.prefix)}/{SOURCEDIR_ARCHIVE}",
        image_uri=torch_images.training_image(settings.region, str(ctx.values[P.TRAINING_INSTANCE_TYPE])),
        framework_version=torch_images.TRAINING_VERSION,
        py_version=torch_images.TRAINING_PY,
        role=settings.role_arn,
        instance_count=params[P.TRAINING_INSTANCE_COUNT],
        instance_type=params[P.TRAINING_INSTANCE_TYPE],
        # torch.distributed: torchrun on every host; it sets RANK, WORLD_SIZE, MASTER_ADDR/PORT.
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={
            training.HP_EPOCHS: params[P.EPOCHS],
            training.HP_BATCH_SIZE: params[P.BATCH_SIZE],
            training.HP_BASE_LEARNING_RATE: params[P.BASE_LEARNING_RATE],
            training.HP_WARMUP_EPOCHS: params[P.WARMUP_EPOCHS],
            training.HP_SEED: settings.seed,
            training.HP_MODEL_ARCHITECTURE: params[P.MODEL_ARCHITECTURE],
            training.HP_IMAGE_SIZE: params[P.IMAGE_SIZE],
            training.HP_AUGMENTATION: params[P.AUGMENTATION],  # training images only (training_torch/augment.py)
            training.HP_TORCH_STRATEGY: ctx.values[P.STRATEGY],
            training.HP_MICRO_BATCHES: params[P.MICRO_BATCHES],
            # The pretrained backbone's phases, under the TensorFlow room's names (training_torch/train.py).
            training.HP_HEAD_EPOCHS: params[P.HEAD_EPOCHS],
            training.HP_FINE_TUNE_LR_FACTOR: params[P.FINE_TUNE_LR_FACTOR],
            PROCESSES_PER_HOST_HYPERPARAMETER: params[P.PROCESSES_PER_HOST],
        },
        metric_definitions=training.METRIC_DEFINITIONS,
        output_path=settings.s3_uri("training"),
        **ctx.training_job_settings(),
    )
