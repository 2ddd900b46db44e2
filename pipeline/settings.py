"""Build-time settings: what SageMaker cannot take as a pipeline variable, fixed when the
definition is built (``trainpipe definition``/``upsert`` flags or TRAINPIPE_* variables).

- Account wiring: region, execution role, artifact bucket and prefix, model package group.
- Image URIs: chosen from the build-time ``TrainingInstanceType`` and ``ProcessingInstanceType``
  (GPU or CPU image), because the SDK must pick an image before any execution exists. Training
  runs on trainpipe's own image (AWS's plus Horovod), in ``training_image_repository``
  (``pipeline/definition/training_image.py``).
- The MPI launch (``custom_mpi_options``: Horovod fusion threshold and cycle time), the
  mixed-precision and fp16-allreduce switches, the optional ``init`` channel, KMS key,
  network isolation, spot training: each changes the shape of the request, not a value in it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace

from pipeline.errors import UserError
from training_entry.contract import (
    MIXED_PRECISION_CHOICES,
    STRATEGIES,
    STRATEGY_HOROVOD,
    STRATEGY_MIRRORED,
    STRATEGY_PARAMETER_SERVER,
)

# Placeholders that make `trainpipe definition` work with no account; upsert replaces them.
PLACEHOLDER_ACCOUNT = "111122223333"
PLACEHOLDER_ROLE = f"arn:aws:iam::{PLACEHOLDER_ACCOUNT}:role/trainpipe-sagemaker-execution"
PLACEHOLDER_BUCKET = "trainpipe-artifacts-placeholder"
# In the placeholder account's ECR; the stack names it <PipelineName>-training.
PLACEHOLDER_TRAINING_REPOSITORY = "trainpipe-training"

# --tune's choices: SageMaker's strategies that take our continuous and integer ranges (Grid
# takes categorical ones only), and its early stopping types.
TUNE_STRATEGIES = ("Bayesian", "Random", "Hyperband")
TUNE_EARLY_STOPPING = ("Auto", "Off")

FRAMEWORK_VERSION = "2.14.1"  # SageMaker's TF 2.14 training image, matching our local TF
PY_VERSION = "py310"
INFERENCE_FRAMEWORK_VERSION = "2.14"
INFERENCE_INSTANCE_TYPE = "ml.m5.large"


@dataclass(frozen=True)
class Settings:
    pipeline_name: str = "trainpipe"
    region: str = "us-east-1"
    role_arn: str = PLACEHOLDER_ROLE
    bucket: str = PLACEHOLDER_BUCKET
    prefix: str = "trainpipe"
    model_package_group: str = "trainpipe-models"
    # The ECR repository of trainpipe's training image (the infra stack's
    # TrainingImageRepositoryUri); None names the offline placeholder account's.
    training_image_repository: str | None = None
    # Horovod: tensor fusion buffer (bytes) and cycle time (ms), passed as -x to every rank.
    # None keeps Horovod's own defaults (64 MiB, 1 ms on 0.28).
    fusion_threshold_bytes: int | None = None
    cycle_time_ms: float | None = None
    mixed_precision: str = "off"
    fp16_allreduce: bool = False
    # How the workers share the training: horovod (MPI allreduce), parameter_server (async
    # updates through parameter servers) or mirrored (TF's MultiWorkerMirroredStrategy).
    distribution: str = STRATEGY_HOROVOD
    seed: int = 42
    # s3:// URI of starting weights (a model.tar.gz or a prefix); adds the `init` channel.
    init_model_uri: str | None = None
    # Path of the user's model file (build_model(input_shape, num_classes, hyperparameters));
    # shipped in the training bundle, see README "Your own data and model".
    model_file: str | None = None
    kms_key_id: str | None = None
    network_isolation: bool = True
    use_spot: bool = False
    max_run_seconds: int = 24 * 3600
    # SageMaker step caching (ISO 8601 duration); None turns it off.
    step_cache_expiry: str | None = "P30D"
    tags: dict = field(default_factory=dict)
    # MLflow: where the cloud jobs log (pipeline/tracking/jobs.py), and local runs (target.py).
    tracking_uri: str | None = None
    # Hyperparameter tuning (--tune N): TrainModel becomes a TuningStep of N trials, up to
    # tune_parallel_jobs at a time (steps/tune.py); 0 leaves the default definition unchanged.
    tune_jobs: int = 0
    tune_parallel_jobs: int = 2
    tune_strategy: str = "Bayesian"  # one of TUNE_STRATEGIES (SageMaker's default)
    tune_early_stopping: str = "Auto"  # or "Off"

    def __post_init__(self):
        if self.tune_jobs < 0 or self.tune_parallel_jobs < 1:
            raise ValueError(f"tune_jobs={self.tune_jobs}, tune_parallel_jobs={self.tune_parallel_jobs}: "
                             f"give --tune N with N >= 1 trials (0: no tuning) and --tune-parallel >= 1")
        if self.tune_strategy == "Hyperband" and self.tune_early_stopping != "Off":
            # SageMaker: Hyperband stops trials itself and refuses TrainingJobEarlyStoppingType=Auto.
            raise ValueError("--tune-strategy Hyperband stops trials itself: pass --tune-early-stopping Off")
        if self.mixed_precision not in MIXED_PRECISION_CHOICES:
            raise ValueError(
                f"mixed_precision={self.mixed_precision!r}: must be one of "
                f"{', '.join(MIXED_PRECISION_CHOICES)}"
            )
        if self.distribution not in STRATEGIES:
            raise ValueError(f"distribution={self.distribution!r}: must be one of {', '.join(STRATEGIES)}")
        if self.distribution != STRATEGY_HOROVOD:
            horovod_only = [name for name, on in (
                ("--fp16-allreduce", self.fp16_allreduce),
                ("--fusion-threshold-bytes", self.fusion_threshold_bytes is not None),
                ("--cycle-time-ms", self.cycle_time_ms is not None)) if on]
            if horovod_only:
                raise ValueError(f"{', '.join(horovod_only)} tune Horovod's allreduce and do nothing with "
                                 f"--distribution {self.distribution}; drop them or use --distribution horovod")
        if self.init_model_uri is not None and not self.init_model_uri.startswith("s3://"):
            raise ValueError(f"init_model_uri={self.init_model_uri!r}: must be an s3:// URI")
        if self.model_file is not None and not (
            self.model_file.endswith(".py") and os.path.isfile(self.model_file)
        ):
            raise ValueError(f"model_file={self.model_file!r}: must be an existing .py file")
        if self.fusion_threshold_bytes is not None and self.fusion_threshold_bytes < 0:
            raise ValueError("fusion_threshold_bytes must be >= 0 (0 disables tensor fusion)")
        if self.cycle_time_ms is not None and self.cycle_time_ms <= 0:
            raise ValueError("cycle_time_ms must be > 0")

    @property
    def custom_mpi_options(self) -> str:
        """Horovod: extra mpirun options SageMaker appends to its launch command."""
        from training_entry.contract import HOROVOD_CYCLE_TIME_ENV, HOROVOD_FUSION_THRESHOLD_ENV

        options = []
        if self.fusion_threshold_bytes is not None:
            options.append(f"-x {HOROVOD_FUSION_THRESHOLD_ENV}={self.fusion_threshold_bytes}")
        if self.cycle_time_ms is not None:
            options.append(f"-x {HOROVOD_CYCLE_TIME_ENV}={self.cycle_time_ms:g}")
        return " ".join(options)

    @property
    def estimator_distribution(self) -> dict:
        """SageMaker: the TensorFlow estimator's ``distribution`` for this strategy."""
        if self.distribution == STRATEGY_PARAMETER_SERVER:
            return {"parameter_server": {"enabled": True}}
        if self.distribution == STRATEGY_MIRRORED:
            return {"multi_worker_mirrored_strategy": {"enabled": True}}
        raise ValueError("horovod's distribution (mpi) takes pipeline parameters: see steps/train.py")

    def s3_uri(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, self.prefix, *parts])


# Environment variables that set a field (the CLI's flags take precedence over these).
ENV_PREFIX = "TRAINPIPE_"


def from_environment(base: Settings | None = None, environ=os.environ) -> Settings:
    """``base`` with every field that has a TRAINPIPE_<FIELD> variable set overridden."""
    base = base or Settings()
    changes = {}
    for f in fields(Settings):
        raw = environ.get(ENV_PREFIX + f.name.upper())
        if raw is None or f.name == "tags":
            continue
        current = getattr(base, f.name)
        if isinstance(current, bool) or f.name in ("network_isolation", "fp16_allreduce", "use_spot"):
            changes[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
        elif isinstance(current, (int, float)) or f.name in ("fusion_threshold_bytes", "seed", "max_run_seconds",
                                                               "cycle_time_ms"):
            # Every number setting by its type (TRAINPIPE_TUNE_JOBS=4 was passed on as the
            # string '4' and failed in a traceback).
            number = float if f.name == "cycle_time_ms" or isinstance(current, float) else int
            try:
                changes[f.name] = number(raw)
            except ValueError:
                raise UserError(f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a {'number' if number is float else 'whole number'}: "
                                f"set it to one, or unset it") from None
        else:
            changes[f.name] = raw
    if "region" not in changes and environ.get("AWS_REGION"):
        changes["region"] = environ["AWS_REGION"]
    try:
        return replace(base, **changes)
    except ValueError as error:  # a value Settings refuses (TRAINPIPE_TUNE_JOBS=-1): one line
        raise UserError(f"{error} (from the TRAINPIPE_ variables)") from None
