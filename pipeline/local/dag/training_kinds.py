"""What a Training step runs, when it is not a script of the user's: an ``@step`` function or a
SageMaker built-in algorithm. Neither runs locally yet; both are told apart here so that the
run refuses them before any step, in one line that names what they are (``stubs.py``), and
not later with advice about a ``sagemaker_program`` they never had.

- ``@step`` (SDK v2 ``sagemaker.workflow.function_step``, v3 likewise): a Training job whose
  ``ContainerEntrypoint`` runs ``job_driver.sh`` from the ``sagemaker_remote_function_bootstrap``
  channel the SDK uploads; the driver reads the pickled function and its arguments from S3 and
  writes the result there itself.
- A built-in algorithm: the image is one of SageMaker's algorithm images (XGBoost in algorithm
  mode, Linear Learner, k-means, ...) and the request names no code of the user's
  (no ``sagemaker_program`` hyperparameter, no ``ContainerEntrypoint``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.local.dag.interpreter import STEP_TRAINING, StepNode

BOOTSTRAP_CHANNEL = "sagemaker_remote_function_bootstrap"
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


def builtin_algorithm(node: StepNode) -> tuple[str, str] | None:
    """(algorithm, image) of a Training step that runs a built-in algorithm, else None."""
    if node.type != STEP_TRAINING:
        return None
    arguments = _arguments(node)
    specification = arguments.get("AlgorithmSpecification") or {}
    image = specification.get("TrainingImage")
    hyperparameters = arguments.get("HyperParameters") or {}
    if not isinstance(image, str) or "sagemaker_program" in hyperparameters or specification.get("ContainerEntrypoint"):
        return None
    repository = image.split("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    algorithm = BUILTIN_ALGORITHMS.get(repository)
    return (algorithm, image) if algorithm else None


def why_not_local(node: StepNode) -> str:
    """Why this Training step does not run locally ("" when it does)."""
    if is_function_step(node):
        return "an @step function, whose remote-function job driver does not run locally yet"
    found = builtin_algorithm(node)
    if found:
        algorithm, image = found
        return (f"image {image} is SageMaker's built-in {algorithm} algorithm, which does not run locally; "
                "an estimator with an entry_point script does")
    return ""
