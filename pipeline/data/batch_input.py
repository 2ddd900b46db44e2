"""Before any job: what ``BatchInputUri`` holds can go through the model the run trains, so
that a wrong prefix is one line now rather than a failed batch transform after training."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pipeline.definition import parameters as P
from pipeline.local.store.storage import Storage
from processing.contract import IMAGE_EXTENSIONS
from training_entry.input.records import KIND_IMAGE


def check_batch_input(storage: Storage, values: Mapping[str, object], kind: str) -> int:
    """How many objects the batch transform will read (0 when BatchInputUri is empty);
    ParameterError (one line) when there are none, or when they do not fit the ``kind`` of
    the training data (images for an image model, CSV rows for a table model)."""
    uri = str(values.get(P.BATCH_INPUT_URI) or "")
    if not uri:
        return 0
    # SageMaker: an S3Prefix input is every object whose key starts with it (Transform reads them all).
    objects = [o for o in storage.list(uri) if not o.endswith("/")]
    if not objects:
        raise P.ParameterError(f"{P.BATCH_INPUT_URI}={uri}: no objects under it; put the data to predict "
                               f"there, or leave {P.BATCH_INPUT_URI} empty to skip batch inference")
    images = [o for o in objects if os.path.splitext(o)[1].lower() in IMAGE_EXTENSIONS]
    if kind == KIND_IMAGE and len(images) < len(objects):
        other = next(o for o in objects if o not in images)
        raise P.ParameterError(
            f"{P.BATCH_INPUT_URI}={uri}: {other} is not a {'/'.join(IMAGE_EXTENSIONS)} image, and the model "
            f"trained on the images of {P.INPUT_DATA_URI} takes one image per object; move it out")
    if kind != KIND_IMAGE and images:
        raise P.ParameterError(
            f"{P.BATCH_INPUT_URI}={uri}: {images[0]} is an image, and the model trained on the table of "
            f"{P.INPUT_DATA_URI} takes CSV rows of its features; give CSV files there")
    return len(objects)
