"""What a Training step runs, when it is not a script of the user's: an ``@step`` function or a
SageMaker built-in algorithm. Both are told apart here so that what cannot run is refused before
any step, in one line that names what it is (``stubs.py``, ``preflight.check_launches``), and
not later with advice about a ``sagemaker_program`` they never had.

- ``@step`` (SDK v2 ``sagemaker.workflow.function_step``, v3 likewise): a Training job whose
  ``ContainerEntrypoint`` runs ``job_driver.sh`` from the ``sagemaker_remote_function_bootstrap``
  channel the SDK uploads; the driver reads the pickled function and its arguments from S3 and
  writes the result there itself. It runs locally (``jobs/function_step.py``) under the runner's
  Python: refused here when that is not the client's Python minor version, or lacks a
  requirement the SDK wrote (a job installs nothing offline), or the function has
  pre-execution commands or a conda environment. SDK v3's job runs in the v3 SDK's environment
  at the client's version instead, which the runner makes before any step
  (``jobs/environments/sdk_v3_environment.py``).
- A built-in algorithm: the image is one of SageMaker's algorithm images (XGBoost in algorithm
  mode, Linear Learner, k-means, ...) and the request names no code of the user's
  (no ``sagemaker_program`` hyperparameter, no ``ContainerEntrypoint``). XGBoost runs locally
  (``jobs/builtin_xgboost.py``) unless it asks for what that run lacks (``xgboost_refusal``);
  every other algorithm is refused.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

from pipeline.local.dag.interpreter import STEP_TRAINING, StepNode

BOOTSTRAP_CHANNEL = "sagemaker_remote_function_bootstrap"
REQUIREMENTS_CHANNEL = "pre_exec_script_and_dependencies"  # SageMaker: the SDK's dependencies channel
# SageMaker's built-in algorithm images (the repository of the image URI; AWS's
# "Docker Registry Paths and Example Code" lists them per region).
BUILTIN_ALGORITHMS = {
    "xgboost": "XGBoost", "sagemaker-xgboost": "XGBoost", "linear-learner": "Linear Learner",
    "kmeans": "k-means", "pca": "PCA", "factorization-machines": "Factorization Machines",
    "ntm": "Neural Topic Model", "randomcutforest": "Random Cut Forest", "knn": "k-NN",
    "object2vec": "Object2Vec", "ipinsights": "IP Insights", "lda": "LDA", "blazingtext": "BlazingText",
    "image-classification": "Image Classification", "object-detection": "Object Detection",
    "semantic-segmentation": "Semantic Segmentation", "seq2seq": "Sequence-to-Sequence",
    "forecasting-deepar": "DeepAR",
}
XGBOOST = "XGBoost"
# SageMaker: sagemaker-xgboost-container data_utils.py get_content_type; the local run reads CSV
# and libsvm (libsvm when the channel names none), not parquet or recordio-protobuf.
XGBOOST_CONTENT_TYPES = ("csv", "text/csv", "libsvm", "text/libsvm", "text/x-libsvm")


def _arguments(node: StepNode) -> Mapping:
    arguments = node.body.get("Arguments") or {}
    return arguments if isinstance(arguments, Mapping) else {}


def is_function_step(node: StepNode) -> bool:
    if node.type != STEP_TRAINING:
        return False
    arguments = _arguments(node)
    entrypoint = (arguments.get("AlgorithmSpecification") or {}).get("ContainerEntrypoint") or []
    channels = [c.get("ChannelName") for c in arguments.get("InputDataConfig") or [] if isinstance(c, Mapping)]
    return BOOTSTRAP_CHANNEL in channels or any(BOOTSTRAP_CHANNEL in str(part) for part in entrypoint)


def container_arguments(request: Mapping) -> list[str]:
    return [str(a) for a in (request.get("AlgorithmSpecification") or {}).get("ContainerArguments") or []]


def option(arguments: list[str], name: str) -> str | None:
    """The value after ``--name`` in the job's ContainerArguments (invoke_function's argparse)."""
    flag = f"--{name}"
    return arguments[arguments.index(flag) + 1] if flag in arguments[:-1] else None


def _installed(requirement: str) -> str:
    """"" when ``requirement`` (a requirements.txt line) is met by this Python, else why not."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        wanted = Requirement(requirement)
    except InvalidRequirement:
        return f"{requirement!r} (not a requirement this runner can check)"
    try:
        have = metadata.version(wanted.name)
    except metadata.PackageNotFoundError:
        return f"{wanted} (not installed)"
    return "" if wanted.specifier.contains(have, prereleases=True) else f"{wanted} (installed: {have})"


def python_refusal(arguments: list[str]) -> str:
    client = option(arguments, "client_python_version")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    # SageMaker: the bootstrap refuses a job whose Python's minor version is not the client's.
    if client and client != here:
        return (f"an @step function pickled under Python {client}; this runner's Python is {here} "
                f"(build the pipeline with Python {here})")
    return ""


def sdk_v3(arguments: list[str]) -> bool:
    """Whether the @step was built with SDK v3 or later (its job runs in that SDK's environment,
    ``jobs/environments/sdk_v3_environment.py``, made by the runner before any step)."""
    major = str(option(arguments, "client_sagemaker_pysdk_version") or "").split(".", 1)[0]
    return major.isdigit() and int(major) >= 3


def function_step_refusal(request: Mapping, storage) -> str:
    """Why this @step job cannot run under this runner's Python ("" when it can): its requirements
    and pre-execution files, read from the store (``storage``) before any step."""
    arguments = container_arguments(request)
    if python_refusal(arguments):
        return python_refusal(arguments)
    import importlib.util

    # The job's boto3 reads and writes S3 through moto's server (jobs/function_step.py).
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
        return "an @step function, whose job needs moto's S3 server here (pip install 'moto[server]')"
    settings = json.loads(option(arguments, "dependency_settings") or "{}")
    channels = {c.get("ChannelName"): c for c in request.get("InputDataConfig") or [] if isinstance(c, Mapping)}
    deps = channels.get(REQUIREMENTS_CHANNEL, {}).get("DataSource", {}).get("S3DataSource", {}).get("S3Uri")
    if deps and isinstance(deps, str):
        names = [uri.rsplit("/", 1)[-1] for uri in storage.list(deps)]
        if "pre_exec.sh" in names:
            return "an @step function with pre_execution_commands/script, which a local job does not run"
        dependency_file = settings.get("dependency_file")
        if dependency_file and dependency_file.endswith((".yml", ".yaml")):
            return f"an @step function whose dependencies are a conda environment ({dependency_file})"
        # SDK v3's job runs in the v3 SDK's environment, not this runner's Python (whose
        # packages the check below reads): its bootstrap's offline pip judges them there.
        if dependency_file and dependency_file in names and not sdk_v3(arguments):
            text = storage.read_bytes(deps.rstrip("/") + "/" + dependency_file).decode()
            lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
            missing = [why for why in (_installed(line) for line in lines if line and not line.startswith("-")) if why]
            if missing:
                return (f"an @step function needing {', '.join(missing)}, which a job cannot install "
                        f"offline; install it into the runner's environment")
    return ""


def builtin_algorithm(node: StepNode) -> tuple[str, str] | None:
    """(algorithm, image) of a Training step that runs a built-in algorithm, else None."""
    return algorithm_of(_arguments(node)) if node.type == STEP_TRAINING else None


def algorithm_of(arguments: Mapping) -> tuple[str, str] | None:
    """(algorithm, image) of a training request (a step's, a tuning job's TrainingJobDefinition)
    that runs a built-in algorithm, else None."""
    specification = arguments.get("AlgorithmSpecification") or {}
    image = specification.get("TrainingImage")
    hyperparameters = arguments.get("HyperParameters") or arguments.get("StaticHyperParameters") or {}
    if not isinstance(image, str) or "sagemaker_program" in hyperparameters or specification.get("ContainerEntrypoint"):
        return None
    repository = image.split("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    algorithm = BUILTIN_ALGORITHMS.get(repository)
    return (algorithm, image) if algorithm else None


def tuning_refusal(arguments: Mapping) -> str:
    """Why a tuning job's trials do not run locally ("" when they may): a built-in algorithm's
    trials are not this runner's built-in XGBoost jobs (``jobs/tuning/trials.py``)."""
    found = algorithm_of(arguments)
    if not found:
        return ""
    algorithm, image = found
    return (f"image {image} is SageMaker's built-in {algorithm} algorithm, whose tuning trials do not run "
            f"locally" + (" (a Training step of it does)" if algorithm == XGBOOST else "")
            + "; tune an estimator with an entry_point script")


def xgboost_refusal(arguments: Mapping) -> str:
    """Why this built-in XGBoost request does not run locally ("" when it does): the settings
    of SageMaker's algorithm the local run lacks. Values an earlier step or a parameter gives
    are judged when the job starts (``jobs/builtin_xgboost.py`` checks again)."""
    specification = arguments.get("AlgorithmSpecification") or {}
    image = specification.get("TrainingImage")
    from pipeline.images import catalog

    record = catalog.find(image)
    if record is None or not str(record.packages.get("xgboost") or "").startswith("=="):
        return (f"image {image} is SageMaker's built-in XGBoost algorithm at a version no record in "
                f"pipeline/images/records/ pins xgboost for; use a version listed there (1.7-1, say)")
    where = f"image {image} is SageMaker's built-in XGBoost algorithm"
    default_mode = specification.get("TrainingInputMode")
    for channel in arguments.get("InputDataConfig") or []:
        if not isinstance(channel, Mapping):
            continue
        name, mode = channel.get("ChannelName"), channel.get("InputMode") or default_mode
        if mode == "Pipe":
            return f"{where}, with channel {name} in Pipe mode, which the local run does not read; use File input"
        kind = channel.get("ContentType")
        if isinstance(kind, str) and kind.split(";", 1)[0].strip().lower() not in XGBOOST_CONTENT_TYPES:
            return (f"{where}, with channel {name} of ContentType {kind}, which the local run does not read; "
                    f"use text/csv or text/libsvm")
    count = (arguments.get("ResourceConfig") or {}).get("InstanceCount")
    if isinstance(count, int) and count > 1:
        return (f"{where}, on {count} instances (distributed XGBoost), which the local run does not do; "
                f"use instance_count=1")
    return ""


def why_not_local(node: StepNode) -> str:
    """Why this Training step does not run locally ("" when it does)."""
    if is_function_step(node):
        # The requirements are read from the store before any step (function_step_refusal).
        return python_refusal(container_arguments(_arguments(node)))
    found = builtin_algorithm(node)
    if found:
        algorithm, image = found
        if algorithm == XGBOOST:
            return xgboost_refusal(_arguments(node))
        return (f"image {image} is SageMaker's built-in {algorithm} algorithm, which does not run locally "
                f"(trainpipe runs only the built-in XGBoost); an estimator with an entry_point script does")
    return ""
