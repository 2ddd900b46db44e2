"""The training container's contract with ``pipeline/``: every shared name, defined once.

Imported by the entrypoints inside the SageMaker containers and by ``pipeline/`` when it builds
the definition or runs it locally. Standard library only, Python 3.10 syntax (the TF 2.14
training image is py310).
"""

from __future__ import annotations

import math
import os
import re

from training_entry.input.records import KIND_TABLE

# SageMaker: every container path lives under /opt/ml. The training toolkit lets
# SAGEMAKER_BASE_DIR move that root; the local runner uses it to give each simulated host its
# own tree, and our processing and evaluation scripts honour it the same way.
BASE_DIR_ENV = "SAGEMAKER_BASE_DIR"
CONTAINER_BASE_DIR = "/opt/ml"
# Raise the limits of training_entry/archives.py (sourcedir, model.tar.gz, the init channel's
# archive) in the environment that extracts it: uncompressed GiB, and members.
ARCHIVE_MAX_GIB_ENV = "TRAINPIPE_ARCHIVE_MAX_GIB"
ARCHIVE_MAX_MEMBERS_ENV = "TRAINPIPE_ARCHIVE_MAX_MEMBERS"


def container_path(path: str) -> str:
    """Where an ``/opt/ml/...`` path is in this container (honours ``SAGEMAKER_BASE_DIR``)."""
    base = os.environ.get(BASE_DIR_ENV)
    if base and (path == CONTAINER_BASE_DIR or path.startswith(CONTAINER_BASE_DIR + "/")):
        return base.rstrip("/") + path[len(CONTAINER_BASE_DIR) :]
    return path


# --- Training container paths (SageMaker: the training container contract) ---------------
INPUT_CONFIG_DIR = "/opt/ml/input/config"
INPUT_DATA_DIR = "/opt/ml/input/data"
MODEL_DIR = "/opt/ml/model"
OUTPUT_DIR = "/opt/ml/output"
FAILURE_FILE = "/opt/ml/output/failure"
# SageMaker: a processing container's reason for failing; becomes the job's ExitMessage.
EXIT_MESSAGE_FILE = "/opt/ml/output/message"
CHECKPOINT_DIR = "/opt/ml/checkpoints"  # SageMaker: CheckpointConfig.LocalPath default
# TF Serving loads numbered versions: /opt/ml/model/1 is servable as it stands.
MODEL_VERSION = "1"
# SageMaker: a framework inference container (SKLearn, PyTorch, TensorFlow with a script)
# imports the script this names, from this folder: an s3:// sourcedir.tar.gz, or
# /opt/ml/model/code where the SDK repacked the script into model.tar.gz.
PROGRAM_ENV = "SAGEMAKER_PROGRAM"
SUBMIT_DIRECTORY_ENV = "SAGEMAKER_SUBMIT_DIRECTORY"
MODEL_CODE_DIR = "/opt/ml/model/code"

# --- Entry point file and channel names ----------------------------------------------------
ENTRY_POINT = "train.py"
CHANNEL_TRAIN = "train"
CHANNEL_VALIDATION = "validation"
# Record counts of every shard (written by processing), always File + FullyReplicated, so
# every rank can work out the same number of steps per epoch without reading the data.
CHANNEL_MANIFEST = "manifest"
# Optional starting weights (a previous model.tar.gz or a SavedModel/weights directory).
CHANNEL_INIT = "init"
DATA_CHANNELS = (CHANNEL_TRAIN, CHANNEL_VALIDATION)

INPUT_MODES = ("File", "Pipe", "FastFile")
DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")

# --- Hyperparameters: the names the definition sends, ``--name value`` in the container -----
HP_EPOCHS = "epochs"
HP_BATCH_SIZE = "batch-size"  # per worker
HP_BASE_LEARNING_RATE = "base-learning-rate"  # per worker, before scaling by hvd.size()
HP_WARMUP_EPOCHS = "warmup-epochs"
HP_SEED = "seed"
HP_MIXED_PRECISION = "mixed-precision"
HP_FP16_ALLREDUCE = "fp16-allreduce"
# Training steps per call into the graph (Keras steps_per_execution): a small model's step is
# mostly Keras' per-call Python dispatch, paid once per call. Callbacks' batch hooks run once
# per call; every step still averages its own gradients (benchmarks/notes.md, P1).
HP_STEPS_PER_EXECUTION = "steps-per-execution"
DEFAULT_STEPS_PER_EXECUTION = 16
# "0": Horovod's per-tensor allreduce instead of one flat allreduce of a small model's
# gradients (training_entry/run/flat_allreduce.py); for measuring, in the job's environment.
FLAT_ALLREDUCE_ENV = "TRAINPIPE_FLAT_ALLREDUCE"
# Threads of tf.data's private pool for a rank's datasets (training_entry/input/datasets.py);
# unset or 0: tf.data's shared pool (one thread per core). The local runner sets it with the
# rank's intra-op threads (pipeline/local/hosts/launch_settings.py, RANK_THREADS_ENV overrides both).
TF_DATA_THREADS_ENV = "TRAINPIPE_TF_DATA_THREADS"
# Set by the local runner beside its own thread choice (never where the user chose threads):
# the intra-op and tf.data threads for a model whose ops are too small to split over several
# threads (SMALL_STEP_ARCHITECTURES). The digits MLP's 64-sample step is ~0.3 ms of
# dispatch-bound ops: one thread trained it 1.26-1.66x faster than two on 2 cores
# (benchmarks/notes.md, P1: "Threads for one rank"); the small CNN's convolutions gain from two.
SMALL_STEP_THREADS_ENV = "TRAINPIPE_SMALL_STEP_THREADS"
MIXED_PRECISION_CHOICES = ("off", "mixed_float16", "mixed_bfloat16")
# How the workers share the training (build setting --distribution; training_entry/run/
# strategies.py): Horovod over MPI (the default, no hyperparameter), TensorFlow's
# ParameterServerStrategy, or its MultiWorkerMirroredStrategy. The estimator's `distribution`
# says which to SageMaker; this hyperparameter says it to the script.
HP_DISTRIBUTION = "distribution"
STRATEGY_HOROVOD = "horovod"
STRATEGY_PARAMETER_SERVER = "parameter_server"
STRATEGY_MIRRORED = "mirrored"
STRATEGIES = (STRATEGY_HOROVOD, STRATEGY_PARAMETER_SERVER, STRATEGY_MIRRORED)

# Images and transfer learning (see training_entry/model/architectures.py, images.py).
# Which room trains (training_entry/ for TensorFlow, training_torch/ for PyTorch): a choice made
# when the definition is built, since it picks the training image and the estimator.
FRAMEWORK_TENSORFLOW = "tensorflow"
FRAMEWORK_PYTORCH = "pytorch"
FRAMEWORKS = (FRAMEWORK_TENSORFLOW, FRAMEWORK_PYTORCH)
# PyTorch (training_torch/): how the ranks share the work, and GPipe's micro-batches per batch.
HP_TORCH_STRATEGY = "strategy"
TORCH_DDP = "ddp"
TORCH_ZERO = ("zero1", "zero2", "zero3")  # DeepSpeed ZeRO stages 1-3
TORCH_GPIPE = "gpipe"
TORCH_STRATEGIES = (TORCH_DDP, *TORCH_ZERO, TORCH_GPIPE)
HP_MICRO_BATCHES = "micro-batches"
DEFAULT_MICRO_BATCHES = 4
# PyTorch: what rank 0 writes to the model folder (TorchScript, readable without our code).
TORCH_MODEL_FILE = "model.pt"
TORCH_METADATA_FILE = "metadata.json"
HP_MODEL_ARCHITECTURE = "model-architecture"
HP_IMAGE_SIZE = "image-size"  # pixels per side the images are resized to
HP_HEAD_EPOCHS = "head-epochs"  # phase 1: the new head only, backbone frozen
HP_FINE_TUNE_LAYERS = "fine-tune-layers"  # phase 2: the top N backbone layers unfrozen
HP_FINE_TUNE_LR_FACTOR = "fine-tune-lr-factor"  # phase 2 rate = phase 1 rate x this
HP_MODEL_FILE = "model-file"  # the user's model file, inside the training bundle
HP_AUGMENTATION = "augmentation"  # training images only
# crop_flip: random crop + horizontal flip; crop: no flip (digits, text: not mirror-symmetric).
AUGMENTATIONS = ("crop_flip", "crop", "none")
DEFAULT_AUGMENTATION = "crop_flip"

# ModelArchitecture values. AUTO: the user's model when one is shipped, else MLP for table
# data and SMALL_CNN for images (the processing manifest's "kind" decides in the job).
ARCH_AUTO = "auto"
ARCH_MLP = "mlp"
ARCH_SMALL_CNN = "small_cnn"
ARCH_CUSTOM = "custom"  # build_model() from the --model-file shipped in the bundle
PRETRAINED_ARCHITECTURES = ("mobilenet_v2", "resnet50", "efficientnet_b0", "efficientnet_lite0")
TABLE_ARCHITECTURES = (ARCH_MLP,)
SMALL_STEP_ARCHITECTURES = (ARCH_MLP,)  # see SMALL_STEP_THREADS_ENV
IMAGE_ARCHITECTURES = (ARCH_SMALL_CNN, *PRETRAINED_ARCHITECTURES)
ARCHITECTURES = (ARCH_AUTO, *TABLE_ARCHITECTURES, *IMAGE_ARCHITECTURES, ARCH_CUSTOM)
# ImageSize 0 (the default): the architecture's own input size. A pretrained backbone's ImageNet
# weights were trained at 224 px, and at 32 px a photo's detail (an ant's legs, a bee's stripes)
# is gone before the backbone sees it; the small CNN was sized for 32 px.
AUTO_IMAGE_SIZE = 0
DEFAULT_IMAGE_SIZE = AUTO_IMAGE_SIZE
SMALL_IMAGE_SIZE = 32  # small_cnn's, and a custom model's
PRETRAINED_IMAGE_SIZE = 224  # what PRETRAINED_ARCHITECTURES' ImageNet weights were trained at
MIN_IMAGE_SIZE = 32  # keras.applications refuse smaller inputs
MAX_IMAGE_SIZE = 1024


def image_size_for(architecture: str, image_size: int) -> int:
    """The pixels per side images are trained at: ``image_size``, or for AUTO_IMAGE_SIZE the
    architecture's own (``auto`` is small_cnn for images, see ARCH_AUTO)."""
    if image_size != AUTO_IMAGE_SIZE:
        return image_size
    return PRETRAINED_IMAGE_SIZE if architecture in PRETRAINED_ARCHITECTURES else SMALL_IMAGE_SIZE
# Transfer learning defaults (pipeline/definition/parameters.py and config.Hyperparameters use these).
DEFAULT_HEAD_EPOCHS = 2
DEFAULT_FINE_TUNE_LAYERS = 30
DEFAULT_FINE_TUNE_LR_FACTOR = 0.1


def architecture_fits(architecture: str, kind: str) -> bool:
    """Whether ``architecture`` can train on data of ``kind`` (``records.KIND_*``; AUTO and
    CUSTOM fit both)."""
    if architecture in (ARCH_AUTO, ARCH_CUSTOM):
        return True
    return architecture in (TABLE_ARCHITECTURES if kind == KIND_TABLE else IMAGE_ARCHITECTURES)


# training_entry.model.init_backbone --weights: ImageNet (downloads) or random (tests, no network).
INIT_WEIGHTS_CHOICES = ("imagenet", "random")
# What init_backbone prints before the file's path: the digest of the weights' values, which the
# training job logs for the weights it starts from ("backbone weights at step 0: sha256 <digest>";
# transfer.weights_digest). Not the file's sha256: an .h5 holds the values among its own metadata.
INIT_WEIGHTS_DIGEST_PREFIX = "weights digest "

# The user's model file: a function of this name, documented in README "Your own data and
# model": build_model(input_shape, num_classes, hyperparameters) -> tf.keras.Model.
USER_MODEL_FUNCTION = "build_model"
USER_MODEL_DIR = "user_model"  # where the file sits inside the training bundle

# --- SavedModel signatures (model/1), what evaluation and endpoints call --------------------
# serving_default: float32 images [None, S, S, 3] in 0..255 (tables: float32 "x" [None, F]).
SIGNATURE_DEFAULT = "serving_default"
SERVING_INPUT_IMAGES = "images"
# serving_bytes: encoded images (PNG/JPEG/GIF/BMP), what a TF Serving / SageMaker client sends.
SIGNATURE_BYTES = "serving_bytes"
SERVING_INPUT_IMAGE_BYTES = "image_bytes"  # tf.string [None]
SERVING_OUTPUT = "probabilities"  # float32 [None, classes], every signature
# string [None]: the predicted class's name (argmax of SERVING_OUTPUT), every signature; TF
# Serving's row format needs every output batched, so a row reads {"probabilities": [...],
# "classes": "cat"}. Names: the manifest's class_names (image class folders, table labels),
# else "0".."K-1" (network.class_names_or_indices).
SERVING_CLASSES = "classes"
# Tables of typed columns (training_entry/model/tabular.py): serving_csv takes CSV lines as the
# training data has them (every feature column in the header's order, label left out).
SIGNATURE_CSV = "serving_csv"
SERVING_INPUT_CSV = "csv_lines"  # tf.string [None]
# What a server tells a client about a table model's rows, beside the SavedModel in the version
# folder (assets.extra/: SavedModel's place for files its graph does not load): {"columns":
# [every feature column's name, header order], "label_column": name}.
SERVING_TABLE_FILE = "assets.extra/trainpipe-table.json"

# Horovod: knobs passed to every rank through the MPI launch (custom_mpi_options, -x NAME=V).
HOROVOD_FUSION_THRESHOLD_ENV = "HOROVOD_FUSION_THRESHOLD"
HOROVOD_CYCLE_TIME_ENV = "HOROVOD_CYCLE_TIME"

# --- MLflow tracking on SageMaker (``trainpipe definition --tracking-uri``) -------------------
# The pipeline execution the job belongs to: its run is a child of that execution's run.
TRACKING_EXECUTION_ENV = "TRAINPIPE_EXECUTION_ID"
# The step a job runs as (its run's tag TRACKING_TAG_STEP): a processing container has no
# name of its own in its environment, and `track sync --execution-arn` matches steps by it.
TRACKING_STEP_ENV = "TRAINPIPE_STEP_NAME"
# The run tags both sides set (pipeline/tracking logs local runs, training_entry/tracking.py
# the cloud job's own): an execution's runs are found by them.
TRACKING_TAG_EXECUTION = "trainpipe.execution_id"
TRACKING_TAG_JOB = "trainpipe.job_name"
TRACKING_TAG_STEP = "trainpipe.step"
TRACKING_TAG_PARENT = "mlflow.parentRunId"  # MLflow's: the run this one is nested under

# --- Metrics: the log line rank 0 prints once per epoch, and the regexes that read it -------
# Keys are chosen so that no key is a substring of another ("loss=" would also match inside
# "val_loss="). No "^" anchors: MPI prefixes every line with its rank tag.
METRIC_LINE_PREFIX = "trainpipe-metrics"
METRIC_KEYS = {
    "loss": "train_loss",
    "accuracy": "train_accuracy",
    "val_loss": "val_loss",
    "val_accuracy": "val_accuracy",
    "throughput": "samples_per_sec",
    # What the scaling advisor (pipeline/costs/advisor) fits: wall and process CPU seconds per
    # training step of this epoch (rank 0), how much its steps vary (half their mean absolute
    # difference: what synchronised ranks wait for each other), the model's parameter count
    # (gradient bytes) and the allreduce operations of a multi-rank step (Horovod reduces each
    # gradient tensor as an operation of its own; 1 where flat_allreduce joins them).
    "step_time": "step_seconds",
    "step_spread": "step_spread_seconds",
    "cpu_time": "cpu_seconds_per_step",
    "parameters": "model_parameters",
    "tensors": "gradient_tensors",
}
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
METRIC_DEFINITIONS = [
    {"Name": name, "Regex": f"{METRIC_LINE_PREFIX}.* {key}=({_NUMBER})"}
    for name, key in METRIC_KEYS.items()
]


def format_metric_line(epoch: int, metrics: dict[str, float]) -> str:
    """The one line per epoch that ``METRIC_DEFINITIONS`` match (metric names as keys)."""
    unknown = set(metrics) - set(METRIC_KEYS)
    if unknown:
        raise ValueError(f"unknown metric(s) {sorted(unknown)}; known: {sorted(METRIC_KEYS)}")
    parts = [f"{METRIC_LINE_PREFIX} epoch={epoch}"]
    for name, key in METRIC_KEYS.items():
        if name in metrics and metrics[name] is not None and math.isfinite(metrics[name]):
            parts.append(f"{key}={metrics[name]:.6g}")
    return " ".join(parts)


def parse_metric_line(line: str) -> dict[str, float]:
    """Apply ``METRIC_DEFINITIONS`` to one log line, as SageMaker does: {metric name: value}."""
    found = {}
    for definition in METRIC_DEFINITIONS:
        match = re.search(definition["Regex"], line)
        if match:
            found[definition["Name"]] = float(match.group(1))
    return found


# A URI's user information (``https://user:password@host``, ``https://token@host``) is a
# credential: wherever trainpipe prints or stores a URI (tracking servers, their errors, run
# links, mlflow.json), it shows ``***`` in its place. Up to the last ``@`` before the path.
_URI_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s\"'<>]+@")
REDACTED = "***"


def redact(text: str) -> str:
    """``text`` with the user information of every URI in it replaced by ``***``."""
    return _URI_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)


def has_userinfo(uri: str) -> bool:
    return _URI_USERINFO.search(uri) is not None


# A parameter or hyperparameter whose name says it holds a secret (db_password, api_token,
# ApiToken, aws_secret_access_key): its value is logged to MLflow as ``***``.
_SECRET_NAME = re.compile(r"passw|passphrase|secret|token|api_?key|access_?key|private_?key|credential|auth(?!or)",
                          re.IGNORECASE)


def loggable_value(name: str, value: str) -> str:
    """``value`` as it may be logged or shown: ``***`` for a secret's name, URIs without their
    user information."""
    return REDACTED if _SECRET_NAME.search(name.replace("-", "_")) else redact(value)
