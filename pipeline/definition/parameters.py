"""Every pipeline parameter: name, type, default, help and validation, defined once.

The names are a contract: the CLI (``-p Name=Value``), the notebook, CI and the local runner
use them. This module does not import the SageMaker SDK, so values can be checked before
anything is built, uploaded or started.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.definition.instances import gpus_per_instance
from pipeline.errors import UserError
from processing import contract as processing_contract
from training_entry import contract as training
from training_entry.contract import DISTRIBUTIONS, INPUT_MODES
from training_entry.input.records import KIND_TABLE
from training_torch import plan as torch_plan


class ParameterError(UserError, ValueError):
    """A parameter value or combination that cannot work; the message says how to fix it."""


@dataclass(frozen=True)
class ParameterSpec:
    name: str
    type: type  # str, int or float: the SageMaker ParameterString/Integer/Float
    help: str
    default: object = None  # None: computed from the build settings (see defaults())
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    may_be_empty: bool = False  # a string whose empty value means "off" (BatchInputUri)
    # Fixed when the definition is built (it picks the image, the estimator, the bundle): taken
    # with -p like the others, but no pipeline variable, so no start can ask for another value.
    build_only: bool = False
    frameworks: tuple = training.FRAMEWORKS  # the frameworks whose definitions carry it
    also: tuple = ()  # values taken outside minimum..maximum (ImageSize's 0: the architecture's own)

    def parse(self, raw) -> object:
        """Convert and check one value (a string from the command line, or a typed value)."""
        try:
            if self.type is int:
                if isinstance(raw, float) and not raw.is_integer():
                    raise ValueError
                value = int(str(raw).strip())
            elif self.type is float:
                value = float(str(raw).strip())
            else:
                value = str(raw)
        except ValueError:
            raise ParameterError(
                f"{self.name}={raw!r}: expected {'an integer' if self.type is int else 'a number'}"
            ) from None
        if self.choices and value not in self.choices:
            raise ParameterError(
                f"{self.name}={value!r}: must be one of {', '.join(self.choices)}"
            )
        if value in self.also:
            return value
        also = "".join(f" (or {v})" for v in self.also)
        if self.minimum is not None and value < self.minimum:
            raise ParameterError(f"{self.name}={value}: must be at least {self.minimum:g}{also}")
        if self.maximum is not None and value > self.maximum:
            raise ParameterError(f"{self.name}={value}: must be at most {self.maximum:g}{also}")
        if self.type is str and not value and not self.may_be_empty:
            raise ParameterError(f"{self.name}: must not be empty")
        return value


INPUT_DATA_URI = "InputDataUri"
LABEL_COLUMN = "LabelColumn"
PROCESSING_INSTANCE_TYPE = "ProcessingInstanceType"
PROCESSING_INSTANCE_COUNT = "ProcessingInstanceCount"
TRAINING_INSTANCE_TYPE = "TrainingInstanceType"
TRAINING_INSTANCE_COUNT = "TrainingInstanceCount"
PROCESSES_PER_HOST = "ProcessesPerHost"
TRAIN_INPUT_MODE = "TrainInputMode"
TRAIN_DISTRIBUTION = "TrainDistribution"
EPOCHS = "Epochs"
BATCH_SIZE = "BatchSize"
BASE_LEARNING_RATE = "BaseLearningRate"
WARMUP_EPOCHS = "WarmupEpochs"
STEPS_PER_EXECUTION = "StepsPerExecution"
ACCURACY_THRESHOLD = "AccuracyThreshold"
MODEL_APPROVAL_STATUS = "ModelApprovalStatus"
MODEL_ARCHITECTURE = "ModelArchitecture"
IMAGE_SIZE = "ImageSize"
AUGMENTATION = "Augmentation"
IMAGE_RECORDS = "ImageRecords"
HEAD_EPOCHS = "HeadEpochs"
FINE_TUNE_LAYERS = "FineTuneLayers"
FINE_TUNE_LR_FACTOR = "FineTuneLearningRateFactor"
BATCH_INPUT_URI = "BatchInputUri"
BATCH_INSTANCE_COUNT = "BatchInstanceCount"
FRAMEWORK = "Framework"
STRATEGY = "Strategy"
MICRO_BATCHES = "MicroBatches"
# The parameters --tune's tuning job chooses for each trial, with the hyperparameter each feeds
# (steps/tune.py keys its ranges by them): a -p of one of them with --tune would be ignored, so
# it is refused (cli/options.py); MLflow shows the best trial's values under these names.
TUNED_PARAMETERS = {BASE_LEARNING_RATE: training.HP_BASE_LEARNING_RATE, BATCH_SIZE: training.HP_BATCH_SIZE,
                    WARMUP_EPOCHS: training.HP_WARMUP_EPOCHS}

APPROVAL_STATUSES = ("PendingManualApproval", "Approved", "Rejected")
# Parameters whose value is an s3:// location: `run --local` also takes a local path for them
# (pipeline/cli/local/data.py copies it under local_upload_uri); elsewhere one must be s3://.
S3_URI_PARAMETERS = (INPUT_DATA_URI, BATCH_INPUT_URI)

SPECS: tuple[ParameterSpec, ...] = (
    ParameterSpec(INPUT_DATA_URI, str, "s3:// prefix of the raw data (one CSV or NPZ file, or an image "
                  "tree <class name>/<image>.jpg|.png); "
                  "default: the embedded digits data in the artifact bucket"),
    ParameterSpec(LABEL_COLUMN, str, "the CSV column holding the label, in any position; its values "
                  "may be 0..K-1 or any names (the classes are their sorted distinct values)",
                  processing_contract.LABEL_COLUMN),
    ParameterSpec(PROCESSING_INSTANCE_TYPE, str, "instance type of the processing and evaluation jobs",
                  "ml.m5.xlarge"),
    ParameterSpec(PROCESSING_INSTANCE_COUNT, int, "instances of the processing job", 1, minimum=1),
    ParameterSpec(TRAINING_INSTANCE_TYPE, str, "instance type of the training job", "ml.c5.2xlarge"),
    ParameterSpec(TRAINING_INSTANCE_COUNT, int, "instances (hosts) of the training job", 2, minimum=1),
    ParameterSpec(PROCESSES_PER_HOST, int, "Horovod ranks per host; default: the GPUs of "
                  "TrainingInstanceType, 1 on CPU types", minimum=1),
    ParameterSpec(TRAIN_INPUT_MODE, str, "how the train/validation channels reach the job",
                  "File", choices=INPUT_MODES),
    ParameterSpec(TRAIN_DISTRIBUTION, str, "how the train/validation objects are spread over hosts",
                  "ShardedByS3Key", choices=DISTRIBUTIONS),
    ParameterSpec(EPOCHS, int, "training epochs", 10, minimum=1),
    ParameterSpec(BATCH_SIZE, int, "batch size per worker", 32, minimum=1),
    ParameterSpec(BASE_LEARNING_RATE, float, "learning rate per worker, before scaling by the "
                  "number of workers", 0.001, minimum=0.0),
    ParameterSpec(WARMUP_EPOCHS, int, "epochs of linear learning-rate warm-up (Goyal et al. 2017)",
                  2, minimum=0),
    ParameterSpec(STEPS_PER_EXECUTION, int, "training steps per call into the TensorFlow graph "
                  "(Keras steps_per_execution): fewer Python round trips for small models",
                  training.DEFAULT_STEPS_PER_EXECUTION, minimum=1),
    ParameterSpec(MODEL_ARCHITECTURE, str, "auto: mlp for a CSV/NPZ table, small_cnn for an image "
                  "tree (your --model-file's model when one is built in); mlp; small_cnn, "
                  "mobilenet_v2, resnet50, efficientnet_b0, efficientnet_lite0 for images; custom",
                  training.ARCH_AUTO, choices=training.ARCHITECTURES),
    ParameterSpec(IMAGE_SIZE, int, "pixels per side images are resized to (images only); "
                  f"{training.AUTO_IMAGE_SIZE}: the architecture's own ({training.PRETRAINED_IMAGE_SIZE} for "
                  f"the pretrained backbones, {training.SMALL_IMAGE_SIZE} for small_cnn and your model)",
                  training.DEFAULT_IMAGE_SIZE, minimum=training.MIN_IMAGE_SIZE,
                  maximum=training.MAX_IMAGE_SIZE, also=(training.AUTO_IMAGE_SIZE,)),
    ParameterSpec(IMAGE_RECORDS, str, "image trees: resized stores each image larger than ImageSize "
                  f"with its short side at ImageSize x {processing_contract.RESIZE_MARGIN:g} (aspect kept, "
                  f"JPEG q{processing_contract.RESIZED_JPEG_QUALITY}: less to decode every epoch); "
                  "original keeps the files' bytes",
                  processing_contract.DEFAULT_IMAGE_RECORDS, choices=processing_contract.IMAGE_RECORDS),
    ParameterSpec(AUGMENTATION, str, "training images: random crop + flip, crop only (digits, "
                  "text), or none", training.DEFAULT_AUGMENTATION, choices=training.AUGMENTATIONS),
    ParameterSpec(HEAD_EPOCHS, int, "pretrained backbones: first epochs train the new head with "
                  "the backbone frozen", training.DEFAULT_HEAD_EPOCHS, minimum=0),
    ParameterSpec(FINE_TUNE_LAYERS, int, "pretrained backbones: top layers unfrozen after the "
                  "head epochs", training.DEFAULT_FINE_TUNE_LAYERS, minimum=0),
    ParameterSpec(FINE_TUNE_LR_FACTOR, float, "learning rate while fine-tuning, as a fraction of "
                  "the scaled rate", training.DEFAULT_FINE_TUNE_LR_FACTOR, minimum=0.0, maximum=1.0),
    ParameterSpec(ACCURACY_THRESHOLD, float, "test accuracy at or above which the model is registered",
                  0.9, minimum=0.0, maximum=1.0),
    ParameterSpec(MODEL_APPROVAL_STATUS, str, "approval status of the registered model package",
                  "PendingManualApproval", choices=APPROVAL_STATUSES),
    ParameterSpec(BATCH_INPUT_URI, str, "s3:// prefix of new data to predict after registration, one "
                  "output per input object (<key>.out: predictions with class names) under the "
                  "execution's output; images, or CSV files of feature rows; empty: no batch inference",
                  "", may_be_empty=True),
    ParameterSpec(BATCH_INSTANCE_COUNT, int, "instances of the batch transform; the input objects are "
                  "split across them", 1, minimum=1),
    ParameterSpec(FRAMEWORK, str, "tensorflow: Horovod over MPI on trainpipe's TF 2.14 image (the strategy "
                  "is --distribution); pytorch: torchrun on AWS's PyTorch training image, the strategy "
                  f"is {STRATEGY}. Fixed when the definition is built", training.FRAMEWORK_TENSORFLOW, choices=training.FRAMEWORKS, build_only=True),
    ParameterSpec(STRATEGY, str, "PyTorch: ddp (DistributedDataParallel), zero1|zero2|zero3 (DeepSpeed ZeRO, "
                  "2+ ranks), gpipe (torch.distributed.pipelining's GPipe, ProcessesPerHost stages per host). "
                  "Fixed when the definition is built (ZeRO adds DeepSpeed to the job's requirements)",
                  training.TORCH_DDP, choices=training.TORCH_STRATEGIES, build_only=True,
                  frameworks=(training.FRAMEWORK_PYTORCH,)),
    ParameterSpec(MICRO_BATCHES, int, "PyTorch gpipe: micro-batches each batch is split into (GPipe's M)",
                  training.DEFAULT_MICRO_BATCHES, minimum=1, frameworks=(training.FRAMEWORK_PYTORCH,)),
)
BY_NAME = {spec.name: spec for spec in SPECS}


def framework_of(declared: Iterable[str]) -> str:
    """The framework a built definition was made for, from the parameters it declares (it
    declares no Framework: that is fixed at build)."""
    names = set(declared)
    return next((f for f in training.FRAMEWORKS if f != training.FRAMEWORK_TENSORFLOW and any(
        name in names and spec.frameworks == (f,) for name, spec in BY_NAME.items())), training.FRAMEWORK_TENSORFLOW)


def pipeline_specs(framework: str) -> tuple[ParameterSpec, ...]:
    """The parameters a definition built for ``framework`` carries as pipeline variables."""
    return tuple(spec for spec in SPECS if not spec.build_only and framework in spec.frameworks)


def default_input_data_uri(bucket: str, prefix: str) -> str:
    return f"s3://{bucket}/{prefix}/data/digits/"


def default_image_data_uri(bucket: str, prefix: str) -> str:
    """The embedded digits as an image tree (``0/ .. 9/`` of PNGs); ``run --local`` puts it
    there when InputDataUri names it, e.g. ``-p InputDataUri=s3://<bucket>/<prefix>/data/digits-images/``."""
    return f"s3://{bucket}/{prefix}/data/digits-images/"


def local_upload_uri(bucket: str, prefix: str, name: str, digest: str) -> str:
    """Where ``run --local`` copies a local file or folder given to an s3:// parameter: named
    after it and its content digest, so a re-run finds it there and changed data gets a new one."""
    return f"s3://{bucket}/{prefix}/uploads/{name}-{digest}/"


def _not_s3(name: str, value: object, bucket: str, prefix: str) -> ParameterError:
    where = f"s3://{bucket}/{prefix}/uploads/"
    copy = (f" (e.g. aws s3 sync {value} {where})"
            if isinstance(value, str) and ("://" not in value or value.startswith("file://")) else "")
    return ParameterError(f"{name}={value!r}: must be an s3:// URI; copy the data to S3 first{copy} "
                          f"and pass that URI (only `trainpipe run --local` copies a local path itself)")


def parse_assignments(assignments: Iterable[str]) -> dict[str, str]:
    """``["Epochs=3", ...]`` from ``-p`` flags -> {"Epochs": "3"}; unknown names are errors."""
    values: dict[str, str] = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise ParameterError(f"-p {item!r}: expected Name=Value, e.g. -p Epochs=3")
        if name not in BY_NAME:
            raise ParameterError(
                f"unknown parameter {name!r}; known parameters: {', '.join(BY_NAME)}"
            )
        values[name] = value
    return values


def resolve(
    overrides: Mapping[str, object],
    *,
    bucket: str,
    prefix: str,
    default_data_records: int | None = None,
) -> dict[str, object]:
    """Defaults plus ``overrides``, each parsed and checked, then the combinations checked.

    ``default_data_records`` is the size of the embedded default data set, used to refuse
    more shards than the smallest split can fill when the run uses that data.
    """
    unknown = set(overrides) - set(BY_NAME)
    if unknown:
        raise ParameterError(
            f"unknown parameter(s) {', '.join(sorted(unknown))}; known: {', '.join(BY_NAME)}"
        )
    values: dict[str, object] = {}
    for spec in SPECS:
        if spec.name in overrides:
            values[spec.name] = spec.parse(overrides[spec.name])
        elif spec.default is not None:
            values[spec.name] = spec.default
    values.setdefault(INPUT_DATA_URI, default_input_data_uri(bucket, prefix))
    framework = values[FRAMEWORK]
    foreign = [name for name in overrides if framework not in BY_NAME[name].frameworks]
    if foreign:
        raise ParameterError(f"{', '.join(foreign)} is for {FRAMEWORK}={training.FRAMEWORK_PYTORCH}, and this "
                             f"build is {FRAMEWORK}={framework}; add -p {FRAMEWORK}={training.FRAMEWORK_PYTORCH} "
                             f"(TensorFlow's strategy is --distribution)")
    for name in S3_URI_PARAMETERS:
        if values.get(name) not in (None, "") and not str(values[name]).startswith("s3://"):
            raise _not_s3(name, values[name], bucket, prefix)
    if PROCESSES_PER_HOST not in values:
        instance_type = values[TRAINING_INSTANCE_TYPE]
        gpus = gpus_per_instance(instance_type)
        if gpus is None:
            raise ParameterError(
                f"{TRAINING_INSTANCE_TYPE}={instance_type!r} is not a type trainpipe knows, so it "
                f"cannot tell how many GPUs (Horovod ranks) it has: pass -p {PROCESSES_PER_HOST}=N"
            )
        values[PROCESSES_PER_HOST] = max(gpus, 1)
    if values[WARMUP_EPOCHS] > values[EPOCHS] and WARMUP_EPOCHS not in overrides:
        # A short run (-p Epochs=1, a smoke test) should not need a second flag: the default
        # warm-up shrinks to the run (warmup_note says so).
        values[WARMUP_EPOCHS] = values[EPOCHS]
    if values[WARMUP_EPOCHS] > values[EPOCHS]:
        raise ParameterError(
            f"{WARMUP_EPOCHS}={values[WARMUP_EPOCHS]} is longer than {EPOCHS}={values[EPOCHS]}: "
            f"the learning rate would never reach its scaled value; lower {WARMUP_EPOCHS}"
        )
    if default_data_records is not None and values[INPUT_DATA_URI] in (
        default_input_data_uri(bucket, prefix), default_image_data_uri(bucket, prefix)
    ):
        check_shards_fit(values, default_data_records)
    return values


def warmup_note(overrides: Mapping[str, object], default_warmup: object | None = None,
                default_epochs: object | None = None) -> str | None:
    """The one line that says the default warm-up was clamped to the run's epochs (see
    ``resolve``), or None. The defaults are this version's unless given (a deployed one's)."""
    if WARMUP_EPOCHS in overrides:
        return None
    warmup = BY_NAME[WARMUP_EPOCHS].default if default_warmup is None else default_warmup
    epochs = overrides.get(EPOCHS, BY_NAME[EPOCHS].default if default_epochs is None else default_epochs)
    try:
        warmup, epochs = int(warmup), BY_NAME[EPOCHS].parse(epochs)
    except (TypeError, ValueError, ParameterError):
        return None
    if warmup <= epochs:
        return None
    return (f"note: {WARMUP_EPOCHS} defaults to {warmup}, longer than {EPOCHS}={epochs}: "
            f"warming up over {epochs} epoch(s) instead")


def strategy_defaults(strategy: str, overrides: Mapping[str, object]) -> tuple[dict[str, str], str | None]:
    """The parameter defaults that work with ``strategy`` where this version's do not, for the
    parameters the user did not set, and the one line that says so (or None).

    ``parameter_server`` on several hosts: the first host only coordinates, so a
    ShardedByS3Key share would never be read (``steps.train.check_strategy`` refuses it when
    the user asked for it); the workers split FullyReplicated records instead. It and
    ``mirrored`` run one training process per host on SageMaker (ProcessesPerHost's default
    is the GPUs per host, for Horovod)."""
    chosen: dict[str, str] = {}
    if strategy == training.STRATEGY_PARAMETER_SERVER and TRAIN_DISTRIBUTION not in overrides:
        chosen[TRAIN_DISTRIBUTION] = "FullyReplicated"
    instance_type = str(overrides.get(TRAINING_INSTANCE_TYPE, BY_NAME[TRAINING_INSTANCE_TYPE].default))
    if strategy != training.STRATEGY_HOROVOD and PROCESSES_PER_HOST not in overrides and \
            (gpus_per_instance(instance_type) or 1) > 1:
        chosen[PROCESSES_PER_HOST] = "1"
    if not chosen:
        return chosen, None
    return chosen, (f"note: --distribution {strategy}: "
                    + ", ".join(f"{name}={value}" for name, value in chosen.items())
                    + " (what it runs with; -p sets another)")


def pretrained_note(overrides: Mapping[str, object], init_model_uri: str | None) -> str | None:
    """The one line that says a pretrained architecture has no weights to start from (the
    job trains the whole network from random weights: training_entry/model/transfer.py), and
    how to get them; None when it has them or is not one."""
    architecture = str(overrides.get(MODEL_ARCHITECTURE, ""))
    if architecture not in training.PRETRAINED_ARCHITECTURES or init_model_uri:
        return None
    if architecture in torch_plan.PRETRAINED_ARCHITECTURES:
        # EfficientNet-Lite0: its weights' package is in both rooms' jobs (the PyTorch bundle's
        # requirements.txt; the TensorFlow room's training image, infra/training-image/Dockerfile).
        return None
    return (f"note: {MODEL_ARCHITECTURE}={architecture} without --init-model-uri: no pretrained weights, so "
            f"the whole network trains from random weights; for ImageNet weights run trainpipe "
            f"init-weights --architecture {architecture} where there is internet, then pass "
            f"--init-model-uri (docs/model.md)")


def world_size(values: Mapping[str, object]) -> int:
    """Horovod ranks = instances x processes per host = train shards the processing writes."""
    return int(values[TRAINING_INSTANCE_COUNT]) * int(values[PROCESSES_PER_HOST])


def check_shards_fit(values: Mapping[str, object], records: int) -> None:
    """Refuse more shards per split than the smallest split has records (empty shards would
    leave ranks, or whole ShardedByS3Key hosts, with no data)."""
    from processing.contract import DEFAULT_TEST_FRACTION, DEFAULT_VALIDATION_FRACTION

    smallest = int(records * min(DEFAULT_TEST_FRACTION, DEFAULT_VALIDATION_FRACTION))
    shards = world_size(values)
    if shards > smallest:
        raise ParameterError(
            f"{TRAINING_INSTANCE_COUNT} x {PROCESSES_PER_HOST} = {shards} shards per split, but "
            f"the default data's smallest split has only {smallest} records; use fewer workers "
            f"or a larger {INPUT_DATA_URI}"
        )


def check_architecture(values: Mapping[str, object], kind: str, has_model_file: bool) -> None:
    """Refuse a ModelArchitecture that cannot train on the data of ``kind`` (``records.KIND_*``,
    from listing InputDataUri), before any job starts."""
    architecture = str(values.get(MODEL_ARCHITECTURE, training.ARCH_AUTO))
    if architecture == training.ARCH_CUSTOM and not has_model_file:
        raise ParameterError(
            f"{MODEL_ARCHITECTURE}=custom needs your model file: build with --model-file my_model.py"
        )
    if not training.architecture_fits(architecture, kind):
        fitting = training.TABLE_ARCHITECTURES if kind == KIND_TABLE else training.IMAGE_ARCHITECTURES
        raise ParameterError(
            f"{MODEL_ARCHITECTURE}={architecture} does not fit the {kind} data under "
            f"{INPUT_DATA_URI}={values.get(INPUT_DATA_URI)}; use one of {', '.join(fitting)} "
            f"(or {training.ARCH_AUTO})"
        )
