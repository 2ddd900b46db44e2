"""The user's model file, checked before any job starts: a subprocess of the environment's
Python runs ``training_entry.model.check_model`` (``pipeline`` never imports TensorFlow), building
the model once with the data's real input shape and class count, read from the store's
listing (``pipeline.data.kind``: class folders; a table's header and label column). Only
where those are unknown before processing (a large table, or one in S3) does it build on a
placeholder, and says so; the job checks again with the manifest in its first seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping

from pipeline.data.shape import DataShape
from pipeline.definition import parameters as P
from pipeline.definition.bundles import REPO_ROOT
from pipeline.environment import scrubbed
from pipeline.errors import UserError
from training_entry import contract as training
from training_entry.input.records import KIND_IMAGE

# Placeholders, only where the data's shape is unknown before processing (a large table).
CHECK_CLASSES = 3
CHECK_FEATURES = 8
CHECK_TIMEOUT_SECONDS = 300


def uses_user_model(values: Mapping[str, object], model_file: str | None) -> bool:
    architecture = values.get(P.MODEL_ARCHITECTURE, training.ARCH_AUTO)
    return bool(model_file) and architecture in (training.ARCH_AUTO, training.ARCH_CUSTOM)


def check_user_model(model_file: str, data: DataShape | str, values: Mapping[str, object]) -> str:
    """One line saying what was built; UserError with the check's one line otherwise.
    ``data``: the shape ``pipeline.data.kind`` read (or only the data's kind)."""
    data = DataShape(data) if isinstance(data, str) else data
    classes = data.num_classes or CHECK_CLASSES
    features = data.num_features or CHECK_FEATURES
    size = training.image_size_for(str(values.get(P.MODEL_ARCHITECTURE, training.ARCH_AUTO)),
                                   int(values.get(P.IMAGE_SIZE, training.DEFAULT_IMAGE_SIZE)))
    shape = (["--image-size", str(size)] if data.kind == KIND_IMAGE
             else ["--features", str(features)])
    command = [sys.executable, "-m", "training_entry.model.check_model", os.path.abspath(model_file),
               *shape, "--classes", str(classes)]
    # The user's code gets what a job's would (pipeline/environment.py): no credential, a
    # HOME of its own (not ~/.aws), trainpipe's code on the path and nothing else of ours.
    with tempfile.TemporaryDirectory(prefix="trainpipe-model-check-") as home:
        env = {**scrubbed(os.environ), "HOME": home, "PYTHONPATH": str(REPO_ROOT)}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=home,
                                  timeout=CHECK_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise UserError(f"--model-file {model_file}: building the model took over "
                            f"{CHECK_TIMEOUT_SECONDS}s") from None
    facts = _facts(data, values)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise UserError(f"--model-file: {lines[-1] if lines else f'check exited {done.returncode}'} ({facts})")
    return f"{done.stdout.strip()} ({facts})"


def _facts(data: DataShape, values: Mapping[str, object]) -> str:
    """Where the check's shape came from, for its one line."""
    if data.class_names is None:
        return (f"the data's classes{'' if data.kind == KIND_IMAGE else ' and features'} are known only "
                f"after processing: checked with placeholders, the job checks again")
    shown = ", ".join(data.class_names[:5]) + (", ..." if len(data.class_names) > 5 else "")
    return f"{P.INPUT_DATA_URI} holds {data.num_classes} classes: {shown}"
