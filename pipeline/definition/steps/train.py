"""TrainModel (Training): Horovod over MPI, ``ProcessesPerHost`` ranks on each host (the
default), or one process per host with TensorFlow's parameter-server or multi-worker mirrored
strategy (build setting ``--distribution``)."""

from __future__ import annotations

from sagemaker.inputs import TrainingInput
from sagemaker.pytorch import PyTorch
from sagemaker.tensorflow import TensorFlow
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.functions import Join
from sagemaker.workflow.retry import (
    SageMakerJobExceptionTypeEnum,
    SageMakerJobStepRetryPolicy,
    StepExceptionTypeEnum,
    StepRetryPolicy,
)
from sagemaker.workflow.steps import ProcessingStep, TrainingStep, TuningStep

from pipeline.definition import parameters as P
from pipeline.definition.bundles import SOURCEDIR_ARCHIVE, user_model_path
from pipeline.definition.steps import train_torch
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.names import STEP_TRAIN
from pipeline.definition.steps.preprocess import split_uri
from pipeline.errors import UserError
from pipeline.settings import FRAMEWORK_VERSION, PY_VERSION, Settings
from processing import contract as processing
from training_entry import contract as training


def train_step(ctx: BuildContext, step_preprocess: ProcessingStep) -> TrainingStep:
    return TrainingStep(
        STEP_TRAIN,
        step_args=_estimator(ctx).fit(inputs=_channels(ctx, step_preprocess)),
        cache_config=ctx.cache,
        retry_policies=_retry_policies(),
    )


def check_strategy(settings: Settings, values) -> None:
    """Refuse, in one line, a parameter value the chosen strategy cannot run with (values:
    the resolved parameters; SageMaker would start the job and fail, or quietly drop data)."""
    strategy = settings.distribution
    if strategy == training.STRATEGY_HOROVOD:
        return
    flag = f"--distribution {strategy}"
    if int(values[P.PROCESSES_PER_HOST]) != 1:
        # SageMaker: the TensorFlow toolkit runs the script once per host for these (no mpirun);
        # MultiWorkerMirroredStrategy uses every GPU of the host from that one process.
        raise UserError(f"{P.PROCESSES_PER_HOST}={values[P.PROCESSES_PER_HOST]} with {flag}: SageMaker "
                        f"starts one training process per host for it; pass -p {P.PROCESSES_PER_HOST}=1")
    if strategy != training.STRATEGY_PARAMETER_SERVER or int(values[P.TRAINING_INSTANCE_COUNT]) == 1:
        return  # SageMaker: one host runs no parameter servers, just the script
    if values[P.TRAIN_DISTRIBUTION] == "ShardedByS3Key":
        # The first host coordinates and reads no data: its share of the objects would be lost.
        raise UserError(f"{P.TRAIN_DISTRIBUTION}=ShardedByS3Key with {flag}: the first host only "
                        f"coordinates, so its share of the data would never be read; pass "
                        f"-p {P.TRAIN_DISTRIBUTION}=FullyReplicated (the workers split the records)")
    if values[P.TRAIN_INPUT_MODE] == "Pipe":
        # The workers' input runs as a graph the coordinator sends them; a Pipe FIFO is read
        # by Python in the process that opens it, and the coordinator host's would stay unread.
        raise UserError(f"{P.TRAIN_INPUT_MODE}=Pipe with {flag}: the workers' input is a TensorFlow "
                        f"graph sent by the coordinator and cannot read Pipe FIFOs; pass "
                        f"-p {P.TRAIN_INPUT_MODE}=File or FastFile")


def _distribution(ctx: BuildContext) -> dict:
    if ctx.settings.distribution != training.STRATEGY_HOROVOD:
        # SageMaker: the toolkit writes TF_CONFIG and starts the parameter servers itself.
        return ctx.settings.estimator_distribution
    # Horovod: SageMaker launches ProcessesPerHost ranks per host with mpirun.
    return {
        "mpi": {
            "enabled": True,
            "processes_per_host": ctx.params[P.PROCESSES_PER_HOST],
            "custom_mpi_options": ctx.settings.custom_mpi_options,
        }
    }


def _estimator(ctx: BuildContext, checkpoints: bool = True) -> TensorFlow | PyTorch:
    """``checkpoints``: False for a tuning job's trials, which must not resume each other's."""
    if ctx.pytorch:
        return train_torch.estimator(ctx)
    settings, params = ctx.settings, ctx.params
    check_strategy(settings, ctx.values)
    training_bundle = ctx.bundles["training"]
    return TensorFlow(
        entry_point=training.ENTRY_POINT,
        source_dir=(
            f"s3://{settings.bucket}/{training_bundle.key_prefix(settings.prefix)}/{SOURCEDIR_ARCHIVE}"
        ),
        # Horovod: trainpipe's image (AWS's TF 2.14 training images have no Horovod).
        image_uri=ctx.training_image(ctx.values[P.TRAINING_INSTANCE_TYPE]),
        framework_version=FRAMEWORK_VERSION,
        py_version=PY_VERSION,
        role=settings.role_arn,
        instance_count=params[P.TRAINING_INSTANCE_COUNT],
        instance_type=params[P.TRAINING_INSTANCE_TYPE],
        distribution=_distribution(ctx),
        hyperparameters={
            training.HP_EPOCHS: params[P.EPOCHS],
            training.HP_BATCH_SIZE: params[P.BATCH_SIZE],
            training.HP_BASE_LEARNING_RATE: params[P.BASE_LEARNING_RATE],
            training.HP_WARMUP_EPOCHS: params[P.WARMUP_EPOCHS],
            training.HP_STEPS_PER_EXECUTION: params[P.STEPS_PER_EXECUTION],
            training.HP_SEED: settings.seed,
            training.HP_MIXED_PRECISION: settings.mixed_precision,
            training.HP_FP16_ALLREDUCE: settings.fp16_allreduce,
            training.HP_MODEL_ARCHITECTURE: params[P.MODEL_ARCHITECTURE],
            training.HP_IMAGE_SIZE: params[P.IMAGE_SIZE],
            training.HP_AUGMENTATION: params[P.AUGMENTATION],
            training.HP_HEAD_EPOCHS: params[P.HEAD_EPOCHS],
            training.HP_FINE_TUNE_LAYERS: params[P.FINE_TUNE_LAYERS],
            training.HP_FINE_TUNE_LR_FACTOR: params[P.FINE_TUNE_LR_FACTOR],
            # The user's model file, shipped in the bundle (a build setting).
            **({training.HP_MODEL_FILE: user_model_path(settings.model_file)} if settings.model_file else {}),
            # The strategy, for the script (absent for Horovod: the default definition unchanged).
            **({training.HP_DISTRIBUTION: settings.distribution}
               if settings.distribution != training.STRATEGY_HOROVOD else {}),
        },
        metric_definitions=training.METRIC_DEFINITIONS,
        output_path=settings.s3_uri("training"),
        # Per execution: a retried job resumes; a new execution does not inherit old epochs.
        checkpoint_s3_uri=Join(
            on="/",
            values=[settings.s3_uri("checkpoints"), ExecutionVariables.PIPELINE_EXECUTION_ID],
        ) if checkpoints else None,
        checkpoint_local_path=training.CHECKPOINT_DIR if checkpoints else None,
        **ctx.training_job_settings(),
    )


def _channels(ctx: BuildContext, step_preprocess: ProcessingStep) -> dict[str, TrainingInput]:
    channels = {
        name: TrainingInput(
            split_uri(step_preprocess, name),
            distribution=ctx.params[P.TRAIN_DISTRIBUTION],
            input_mode=ctx.params[P.TRAIN_INPUT_MODE],
        )
        for name in training.DATA_CHANNELS
    }
    # Every rank reads every shard's record count, to agree on steps per epoch.
    channels[training.CHANNEL_MANIFEST] = TrainingInput(
        split_uri(step_preprocess, processing.OUTPUT_MANIFEST),
        distribution="FullyReplicated",
        input_mode="File",
    )
    if ctx.settings.init_model_uri:
        channels[training.CHANNEL_INIT] = TrainingInput(
            ctx.settings.init_model_uri, distribution="FullyReplicated", input_mode="File"
        )
    return channels


def _retry_policies() -> list:
    return [
        # Transient: capacity, throttling, service faults. A retried job resumes from the
        # execution's checkpoints (see checkpoint_s3_uri).
        StepRetryPolicy(
            exception_types=[StepExceptionTypeEnum.SERVICE_FAULT, StepExceptionTypeEnum.THROTTLING],
            interval_seconds=30, backoff_rate=2.0, max_attempts=3,
        ),
        SageMakerJobStepRetryPolicy(
            exception_types=[
                SageMakerJobExceptionTypeEnum.CAPACITY_ERROR,
                SageMakerJobExceptionTypeEnum.INTERNAL_ERROR,
                SageMakerJobExceptionTypeEnum.RESOURCE_LIMIT,
            ],
            interval_seconds=60, backoff_rate=2.0, max_attempts=3,
        ),
    ]


def model_artifact(step_train: TrainingStep | TuningStep):
    """The model.tar.gz the training job wrote; a TuningStep's best trial's (``steps/tune.py``)."""
    if isinstance(step_train, TuningStep):
        return step_train.top_model
    return step_train.properties.ModelArtifacts.S3ModelArtifacts
