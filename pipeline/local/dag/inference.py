"""Which CreateModel containers the local runner can serve, read from the definition alone
(so a Model step it cannot serve is refused before the run, ``stubs.py``).

- ``tfs``: a SageMaker TensorFlow Serving inference image (``tensorflow-inference``) without
  an inference script: the ``<version>/saved_model.pb`` archive, served by ``serving.server``;
- ``framework``: an SKLearn, PyTorch or TensorFlow image with an entry-point script
  (``SAGEMAKER_PROGRAM``) that follows the sagemaker-inference toolkit's ``model_fn`` /
  ``input_fn`` / ``predict_fn`` / ``output_fn`` contract, served by ``serving.handler``.
"""

from __future__ import annotations

import re

from pipeline.local.dag.interpreter import STEP_MODEL, STEP_TRANSFORM  # noqa: F401 (re-exported)
from training_entry.contract import PROGRAM_ENV, SUBMIT_DIRECTORY_ENV  # noqa: F401 (the script's name, folder)

TFS, FRAMEWORK = "tfs", "framework"
_TFS_IMAGE = re.compile(r"/tensorflow-inference(-eia)?:|/sagemaker-tensorflow-serving(-eia)?:")
_FRAMEWORK_IMAGE = re.compile(r"/(sagemaker-scikit-learn|pytorch-inference|tensorflow-inference|sklearn-inference):")


def containers(arguments: dict) -> list:
    """A CreateModel request's containers (PrimaryContainer, or Containers)."""
    if arguments.get("PrimaryContainer") is not None:
        return [arguments["PrimaryContainer"]]
    return list(arguments.get("Containers") or [])


def model_kind(arguments: dict) -> tuple[str | None, str]:
    """(TFS, FRAMEWORK or None, why not) for a CreateModel request; an image given by an
    expression (a parameter) is decided when the step runs, as TFS/FRAMEWORK by its text."""
    found = containers(arguments)
    if len(found) != 1:
        return None, f"{len(found)} containers (an inference pipeline): the local runner serves one"
    container = found[0] if isinstance(found[0], dict) else {}
    image = container.get("Image")
    environment = container.get("Environment") or {}
    if not isinstance(image, str):
        return (TFS if image is not None else None), "no Image"
    program = environment.get(PROGRAM_ENV) if isinstance(environment, dict) else None
    if program and _FRAMEWORK_IMAGE.search(image):
        return FRAMEWORK, ""
    if _TFS_IMAGE.search(image):
        return TFS, ""
    return None, (f"image {image} is neither a SageMaker TensorFlow Serving image nor an SKLearn, PyTorch or "
                  f"TensorFlow image with an entry-point script ({PROGRAM_ENV})")
