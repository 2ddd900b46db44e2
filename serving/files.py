"""What a file given to ``predict`` is, by its name: its request Content-Type and the kind of
model that takes it. Standard library only: ``trainpipe predict`` reads it to choose a model
before anything imports TensorFlow (``serving.predict`` decodes the files the same way).
"""

from __future__ import annotations

from pathlib import Path

# The data kinds, as the processing manifests and evaluation.json name them
# (training_entry.input.records.KIND_*, a stdlib module).
from training_entry.input.records import KIND_IMAGE, KIND_TABLE

CSV_TYPE = "text/csv"  # serving.codec.CSV_TYPE (tests/serving/test_predict.py checks they agree)
IMAGE_TYPE = "application/x-image"  # any other file: one encoded image
JSON_BODY_TYPES = {".json": "application/json", ".jsonl": "application/jsonlines"}
TYPES_BY_SUFFIX = {".csv": CSV_TYPE, **JSON_BODY_TYPES,
                   ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
# predict's exit status when the reader of its output went away (``| head -2``): what a shell
# reports for a process that SIGPIPE ended (``yes | head -1``), so a pipeline reads it the same.
BROKEN_PIPE_STATUS = 128 + 13


def content_type(path: Path | str) -> str:
    return TYPES_BY_SUFFIX.get(Path(path).suffix.lower(), IMAGE_TYPE)


def kind_of(path: Path | str) -> str | None:
    """``KIND_TABLE`` for CSV rows, ``KIND_IMAGE`` for an image, None for a JSON body (either)."""
    suffix = Path(path).suffix.lower()
    if suffix in JSON_BODY_TYPES:
        return None
    return KIND_TABLE if suffix == ".csv" else KIND_IMAGE


SAVED_MODEL_FILE = "saved_model.pb"  # a TensorFlow SavedModel's graph, in <model>/<version>/
MAX_ARCHIVE_MEMBERS = 100_000  # answerable_archive reads no further: no model of ours holds that many
SCRIPT = "inference.py"  # SageMaker: the inference toolkit's default module in <model>/code


def is_script_model(model_dir: Path | str) -> bool:
    """A model answered through ``<model_dir>/code/inference.py`` (the PyTorch room's, for AWS's
    PyTorch inference image) rather than a SavedModel."""
    root = Path(model_dir)
    return (root / "code" / SCRIPT).is_file() and not any(root.glob(f"*/{SAVED_MODEL_FILE}"))


def answerable_archive(archive: Path | str) -> bool:
    """Whether a model.tar.gz holds a model ``trainpipe serve``/``predict`` answer: a SavedModel
    (``<version>/saved_model.pb``, or at the top) or the PyTorch room's ``code/inference.py``;
    not, say, a built-in algorithm's ``xgboost-model``. Read from its member names alone."""
    import itertools
    import tarfile

    try:
        with tarfile.open(archive) as tar:
            names = [m.name.removeprefix("./") for m in itertools.islice(tar, MAX_ARCHIVE_MEMBERS)]
    except (OSError, EOFError, tarfile.TarError):
        return False
    return any(n == SAVED_MODEL_FILE or (n.endswith(f"/{SAVED_MODEL_FILE}") and n.count("/") == 1)
               or n == f"code/{SCRIPT}" for n in names)
