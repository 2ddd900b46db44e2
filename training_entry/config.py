"""Everything the training job is told, read the way SageMaker tells it.

SageMaker: the training toolkit passes hyperparameters as ``--name value`` arguments (sorted;
``str()`` of the JSON-decoded value, so a boolean arrives as ``True``), adds its own
(``--model_dir``), and describes the job in ``SM_*`` variables and ``/opt/ml/input/config``
files. Every path falls back to its ``/opt/ml`` location (moved by ``SAGEMAKER_BASE_DIR``) so
the script also runs under a bare ``mpirun`` with a hand-made tree.

Python 3.10 syntax, standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from training_entry import contract
from training_entry.failure import UserError

INPUT_DATA_CONFIG_FILE = "inputdataconfig.json"
RESOURCE_CONFIG_FILE = "resourceconfig.json"
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class ConfigError(UserError):
    """A hyperparameter, channel or config file is missing or malformed."""


# --- Hyperparameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class Hyperparameters:
    # Defaults match pipeline/definition/parameters.py and settings.py, so a bare local run behaves
    # like the pipeline's default execution.
    epochs: int = 10
    batch_size: int = 32  # per worker
    base_learning_rate: float = 0.001  # per worker; scaled by the number of workers
    warmup_epochs: float = 2.0
    steps_per_execution: int = contract.DEFAULT_STEPS_PER_EXECUTION
    seed: int = 42
    mixed_precision: str = "off"
    fp16_allreduce: bool = False
    model_architecture: str = contract.ARCH_AUTO
    image_size: int = contract.SMALL_IMAGE_SIZE  # resolved (contract.image_size_for): auto's images
    head_epochs: int = contract.DEFAULT_HEAD_EPOCHS
    fine_tune_layers: int = contract.DEFAULT_FINE_TUNE_LAYERS
    fine_tune_lr_factor: float = contract.DEFAULT_FINE_TUNE_LR_FACTOR
    augmentation: str = contract.DEFAULT_AUGMENTATION
    model_file: str | None = None  # relative to the code directory (the bundle's root)
    distribution: str = contract.STRATEGY_HOROVOD  # training_entry/run/strategies.py


def parse_bool(text: str) -> bool:
    """SageMaker: ``True``/``False`` on the command line, ``true``/``false`` in SM_HP_*."""
    lowered = str(text).strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (use true or false)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print usage and exit(2)
        raise ConfigError(f"bad hyperparameter: {message}")


def _parser() -> argparse.ArgumentParser:
    d = Hyperparameters()
    p = _Parser(prog="train.py", add_help=False, allow_abbrev=False)
    p.add_argument(f"--{contract.HP_EPOCHS}", dest="epochs", type=int, default=d.epochs)
    p.add_argument(f"--{contract.HP_BATCH_SIZE}", dest="batch_size", type=int, default=d.batch_size)
    p.add_argument(f"--{contract.HP_BASE_LEARNING_RATE}", dest="base_learning_rate", type=float,
                   default=d.base_learning_rate)
    p.add_argument(f"--{contract.HP_WARMUP_EPOCHS}", dest="warmup_epochs", type=float,
                   default=d.warmup_epochs)
    p.add_argument(f"--{contract.HP_STEPS_PER_EXECUTION}", dest="steps_per_execution", type=int,
                   default=d.steps_per_execution)
    p.add_argument(f"--{contract.HP_SEED}", dest="seed", type=int, default=d.seed)
    p.add_argument(f"--{contract.HP_MIXED_PRECISION}", dest="mixed_precision",
                   choices=contract.MIXED_PRECISION_CHOICES, default=d.mixed_precision)
    p.add_argument(f"--{contract.HP_FP16_ALLREDUCE}", dest="fp16_allreduce", type=parse_bool,
                   default=d.fp16_allreduce)
    p.add_argument(f"--{contract.HP_MODEL_ARCHITECTURE}", dest="model_architecture",
                   choices=contract.ARCHITECTURES, default=d.model_architecture)
    p.add_argument(f"--{contract.HP_IMAGE_SIZE}", dest="image_size", type=int,
                   default=contract.DEFAULT_IMAGE_SIZE)
    p.add_argument(f"--{contract.HP_HEAD_EPOCHS}", dest="head_epochs", type=int, default=d.head_epochs)
    p.add_argument(f"--{contract.HP_FINE_TUNE_LAYERS}", dest="fine_tune_layers", type=int,
                   default=d.fine_tune_layers)
    p.add_argument(f"--{contract.HP_FINE_TUNE_LR_FACTOR}", dest="fine_tune_lr_factor", type=float,
                   default=d.fine_tune_lr_factor)
    p.add_argument(f"--{contract.HP_AUGMENTATION}", dest="augmentation", choices=contract.AUGMENTATIONS,
                   default=d.augmentation)
    p.add_argument(f"--{contract.HP_MODEL_FILE}", dest="model_file", default=d.model_file)
    p.add_argument(f"--{contract.HP_DISTRIBUTION}", dest="distribution", choices=contract.STRATEGIES,
                   default=d.distribution)
    # SageMaker: the TensorFlow estimator always adds model_dir (/opt/ml/model under MPI, an
    # s3:// URI otherwise). We save where SM_MODEL_DIR points, which is what gets uploaded.
    p.add_argument("--model_dir", dest="model_dir", default=None)
    return p


def parse_hyperparameters(argv: Sequence[str]) -> tuple[Hyperparameters, str | None, list[str]]:
    """(hyperparameters, --model_dir or None, arguments we do not know, kept for a notice)."""
    known, unknown = _parser().parse_known_args(list(argv))
    model_dir = known.model_dir
    values = {k: v for k, v in vars(known).items() if k != "model_dir"}
    values["image_size"] = contract.image_size_for(values["model_architecture"], values["image_size"])
    hp = Hyperparameters(**values)
    checks = [
        (hp.epochs >= 1, f"--{contract.HP_EPOCHS} {hp.epochs}: must be at least 1"),
        (hp.batch_size >= 1, f"--{contract.HP_BATCH_SIZE} {hp.batch_size}: must be at least 1"),
        (hp.base_learning_rate > 0,
         f"--{contract.HP_BASE_LEARNING_RATE} {hp.base_learning_rate}: must be positive"),
        (hp.warmup_epochs >= 0,
         f"--{contract.HP_WARMUP_EPOCHS} {hp.warmup_epochs}: must be 0 or more"),
        (hp.steps_per_execution >= 1,
         f"--{contract.HP_STEPS_PER_EXECUTION} {hp.steps_per_execution}: must be at least 1"),
        (contract.MIN_IMAGE_SIZE <= hp.image_size <= contract.MAX_IMAGE_SIZE,
         f"--{contract.HP_IMAGE_SIZE} {hp.image_size}: must be {contract.MIN_IMAGE_SIZE}.."
         f"{contract.MAX_IMAGE_SIZE}"),
        (hp.head_epochs >= 0, f"--{contract.HP_HEAD_EPOCHS} {hp.head_epochs}: must be 0 or more"),
        (hp.fine_tune_layers >= 0,
         f"--{contract.HP_FINE_TUNE_LAYERS} {hp.fine_tune_layers}: must be 0 or more"),
        (0 < hp.fine_tune_lr_factor <= 1,
         f"--{contract.HP_FINE_TUNE_LR_FACTOR} {hp.fine_tune_lr_factor}: must be in (0, 1]"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"bad hyperparameter: {message}")
    return hp, model_dir, unknown


# --- Channels --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Channel:
    name: str
    mode: str  # File | FastFile | Pipe
    distribution: str  # FullyReplicated | ShardedByS3Key
    directory: str  # File/FastFile: where the objects are; Pipe: unused (see fifo_dir)

    @property
    def is_pipe(self) -> bool:
        return self.mode == "Pipe"


def _config_dir(env: Mapping[str, str]) -> str:
    return env.get("SM_INPUT_CONFIG_DIR") or contract.container_path(contract.INPUT_CONFIG_DIR)


def input_data_dir(env: Mapping[str, str]) -> str:
    """SageMaker: channel directories and Pipe FIFOs live in /opt/ml/input/data."""
    if env.get("SM_INPUT_DIR"):
        return os.path.join(env["SM_INPUT_DIR"], "data")
    return contract.container_path(contract.INPUT_DATA_DIR)


def load_input_data_config(env: Mapping[str, str]) -> tuple[dict[str, dict], str]:
    """(channel -> its inputdataconfig entry, where it came from)."""
    # SageMaker: the toolkit exports the file's content as SM_INPUT_DATA_CONFIG.
    if env.get("SM_INPUT_DATA_CONFIG"):
        source, text = "SM_INPUT_DATA_CONFIG", env["SM_INPUT_DATA_CONFIG"]
    else:
        source = os.path.join(_config_dir(env), INPUT_DATA_CONFIG_FILE)
        try:
            with open(source) as f:
                text = f.read()
        except FileNotFoundError:
            raise ConfigError(
                f"{source} is missing: SageMaker writes it for every training job; a local run "
                f"must write input/config/{INPUT_DATA_CONFIG_FILE} under SAGEMAKER_BASE_DIR "
                f"(or set SM_INPUT_DATA_CONFIG) with one entry per channel"
            ) from None
    example = '{"train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}}'
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{source} is not valid JSON ({e}); expected e.g. {example}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ConfigError(
            f"{source} must map each channel name to an object, e.g. {example}; got {text[:200]!r}"
        )
    return doc, source


def channel(
    name: str, config: Mapping[str, dict], source: str, env: Mapping[str, str], required: bool
) -> Channel | None:
    if name not in config:
        if not required:
            return None
        raise ConfigError(
            f"channel {name!r} is missing from {source} (it has: {', '.join(sorted(config)) or 'none'}); "
            f"pass a {name!r} input to the training job"
        )
    entry = config[name]
    mode = entry.get("TrainingInputMode", "File")
    if mode not in contract.INPUT_MODES:
        raise ConfigError(
            f"{source}: channel {name!r} has TrainingInputMode {mode!r}; "
            f"use one of {', '.join(contract.INPUT_MODES)}"
        )
    # SageMaker's own local mode writes only TrainingInputMode; absent means the default.
    distribution = entry.get("S3DistributionType", "FullyReplicated")
    if distribution not in contract.DISTRIBUTIONS:
        raise ConfigError(
            f"{source}: channel {name!r} has S3DistributionType {distribution!r}; "
            f"use one of {', '.join(contract.DISTRIBUTIONS)}"
        )
    # SageMaker: RecordIO wrapping puts a header before every object in a Pipe stream; our
    # readers expect the TFRecord shards' bytes unchanged. (Gzip is fine: Pipe mode delivers
    # the objects decompressed.)
    wrapper = entry.get("RecordWrapperType", "None")
    if wrapper not in ("None", None):
        raise ConfigError(
            f"{source}: channel {name!r} has RecordWrapperType {wrapper!r}; the channel must "
            f"carry the TFRecord shards unchanged: drop record_wrapping from its TrainingInput"
        )
    directory = env.get(f"SM_CHANNEL_{name.upper()}") or os.path.join(input_data_dir(env), name)
    return Channel(name, mode, distribution, directory)


# --- Hosts -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hosts:
    current: str
    hosts: tuple[str, ...]  # sorted

    @property
    def index(self) -> int:
        return self.hosts.index(self.current)

    @property
    def count(self) -> int:
        return len(self.hosts)


def load_hosts(env: Mapping[str, str]) -> Hosts:
    """resourceconfig.json, else SM_HOSTS/SM_CURRENT_HOST, else a single host.

    SageMaker: the file comes first because it is written on each host, while the toolkit
    launches every rank with the first host's environment (``mpirun -x SM_...``), so on the
    other hosts SM_CURRENT_HOST names the first host.
    """
    source = os.path.join(_config_dir(env), RESOURCE_CONFIG_FILE)
    if not os.path.exists(source):
        if not (env.get("SM_HOSTS") and env.get("SM_CURRENT_HOST")):
            return Hosts("algo-1", ("algo-1",))
        source = "SM_HOSTS"
        try:
            hosts = json.loads(env["SM_HOSTS"])
        except ValueError as e:
            raise ConfigError(f"SM_HOSTS is not a JSON list of host names ({e})") from None
        current = env["SM_CURRENT_HOST"]
    else:
        try:
            with open(source) as f:
                doc = json.load(f)
            hosts, current = doc["hosts"], doc["current_host"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(
                f"{source} is unreadable or lacks hosts/current_host ({e!r}); SageMaker writes "
                f"it, so check the local runner's host setup"
            ) from None
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise ConfigError(f"{source}: hosts must be a non-empty list of names, got {hosts!r}")
    if current not in hosts:
        raise ConfigError(f"{source}: current host {current!r} is not among hosts {hosts}")
    # SageMaker: host i of a sorted list gets the i-th share under ShardedByS3Key.
    return Hosts(current, tuple(sorted(hosts)))


# --- The whole job ---------------------------------------------------------------------------
@dataclass(frozen=True)
class JobConfig:
    hp: Hyperparameters
    hosts: Hosts
    train: Channel
    validation: Channel | None
    manifest: Channel
    init: Channel | None
    model_dir: str
    checkpoint_dir: str
    fifo_dir: str  # SageMaker: Pipe channels arrive as FIFOs <fifo_dir>/<channel>_<n>
    config_dir: str
    notices: tuple[str, ...]  # things worth one line in the log (ignored arguments, ...)


def load(argv: Sequence[str], env: Mapping[str, str] | None = None) -> JobConfig:
    env = os.environ if env is None else env
    hp, model_dir_arg, unknown = parse_hyperparameters(argv)
    config, source = load_input_data_config(env)
    train = channel(contract.CHANNEL_TRAIN, config, source, env, required=True)
    manifest = channel(contract.CHANNEL_MANIFEST, config, source, env, required=True)
    if manifest.is_pipe:
        raise ConfigError(
            f"{source}: channel {manifest.name!r} must be File mode (every rank reads the "
            f"record counts before training starts), not Pipe"
        )
    validation = channel(contract.CHANNEL_VALIDATION, config, source, env, required=False)
    init = channel(contract.CHANNEL_INIT, config, source, env, required=False)
    if init is not None and init.is_pipe:
        raise ConfigError(f"{source}: channel {init.name!r} must be File mode, not Pipe")
    model_dir = env.get("SM_MODEL_DIR") or contract.container_path(contract.MODEL_DIR)
    notices = []
    if unknown:
        notices.append(f"ignoring unknown arguments {' '.join(unknown)}")
    if validation is None:
        notices.append(f"no {contract.CHANNEL_VALIDATION!r} channel: training without validation")
    if model_dir_arg and not model_dir_arg.startswith("s3://") and (
        os.path.abspath(model_dir_arg) != os.path.abspath(model_dir)
    ):
        notices.append(f"--model_dir {model_dir_arg} ignored: the model goes to {model_dir}")
    return JobConfig(
        hp=hp,
        hosts=load_hosts(env),
        train=train,
        validation=validation,
        manifest=manifest,
        init=init,
        model_dir=model_dir,
        checkpoint_dir=contract.container_path(contract.CHECKPOINT_DIR),
        fifo_dir=input_data_dir(env),
        config_dir=_config_dir(env),
        notices=tuple(notices),
    )
