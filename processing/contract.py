"""The processing container's contract with ``pipeline/``: paths, output names, arguments.

Standard library only, Python 3.10 syntax. Every path is an in-container path; the scripts
resolve it with ``training_entry.contract.container_path`` so the local runner can move it.
"""

from __future__ import annotations

from collections.abc import Iterable

from training_entry.input.records import KIND_IMAGE, KIND_TABLE

ENTRY_POINT = "preprocess.py"

# SageMaker: processing inputs and outputs must live under /opt/ml/processing/.
CODE_DIR = "/opt/ml/processing/input/code"
RAW_DATA_DIR = "/opt/ml/processing/input/data"
# SageMaker: {"current_host": "algo-1", "hosts": ["algo-1", ...]} on every processing host.
RESOURCE_CONFIG = "/opt/ml/config/resourceconfig.json"

SPLITS = ("train", "validation", "test")
# Output name -> in-container directory; the output names are also the ProcessingOutput names
# that later steps reference (Steps.PreprocessData.ProcessingOutputConfig.Outputs['train']).
OUTPUT_MANIFEST = "manifest"
OUTPUT_DIRS = {
    "train": "/opt/ml/processing/output/train",
    "validation": "/opt/ml/processing/output/validation",
    "test": "/opt/ml/processing/output/test",
    OUTPUT_MANIFEST: "/opt/ml/processing/output/manifest",
}

# Container arguments (``--name value``): how many shards to write is instances x processes
# per host of the *training* job, so each worker reads its own shard.
ARG_INSTANCE_COUNT = "--instance-count"
ARG_PROCESSES_PER_HOST = "--processes-per-host"
ARG_SEED = "--seed"
ARG_VALIDATION_FRACTION = "--validation-fraction"
ARG_TEST_FRACTION = "--test-fraction"

DEFAULT_SEED = 42
DEFAULT_VALIDATION_FRACTION = 0.15
DEFAULT_TEST_FRACTION = 0.15

# Raw input formats the script accepts (one file in RAW_DATA_DIR): CSV with a header whose
# last column is the integer label, or NPZ with arrays "x" (n, features) and "y" (n,).
RAW_SUFFIXES = (".csv", ".npz")
LABEL_COLUMN = "label"

# --- What kind of data InputDataUri holds --------------------------------------------------
# An image tree is ``<class name>/<file>`` (files may sit deeper below their class folder,
# like torchvision's ImageFolder); class ids are the sorted class names.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
# Named in messages (pipeline/definition/parameters.py defines the parameter; a test keeps them equal).
_INPUT_PARAMETER = "InputDataUri"
_SHOWN = 3


class DataKindError(ValueError):
    """InputDataUri holds no data, or a mix that is neither one table nor one image tree."""


def data_kind(keys: Iterable[str]) -> str:
    """``KIND_TABLE`` or ``KIND_IMAGE`` from the keys (relative, '/'-separated) below
    InputDataUri: what an S3 listing gives, before any job starts. Hidden entries (a name
    starting with '.', at any depth) are ignored, as the processing step ignores them.

    Raises ``DataKindError`` (one line naming a file and the fix) for nothing usable, table
    files next to images, images outside a class folder, or other files in an image tree.
    """
    tables, images, others = [], [], []
    for key in keys:
        parts = [p for p in key.strip("/").split("/") if p]
        if not parts or any(p.startswith(".") for p in parts):
            continue
        suffix = _suffix(parts[-1])
        if suffix in RAW_SUFFIXES:
            tables.append(key)
        elif suffix in IMAGE_EXTENSIONS:
            images.append(parts)
        else:
            others.append(key)
    if tables and images:
        raise DataKindError(
            f"{_INPUT_PARAMETER} mixes table data ({_show(tables)}) with {len(images)} image(s) "
            f"(e.g. {'/'.join(images[0])}); point it at a prefix holding either one "
            f"{' or '.join(RAW_SUFFIXES)} file or an image tree <class name>/<image>"
        )
    if tables:
        return KIND_TABLE
    if not images:
        seen = f" (it holds only {_show(others)})" if others else " (it is empty)"
        raise DataKindError(
            f"no raw data under {_INPUT_PARAMETER}{seen}; point it at a prefix holding one "
            f"{' or '.join(RAW_SUFFIXES)} file or an image tree <class name>/<image> "
            f"({'/'.join(IMAGE_EXTENSIONS)})"
        )
    loose = [parts for parts in images if len(parts) == 1]
    if loose:
        raise DataKindError(
            f"image {loose[0][0]} is not in a class folder ({len(loose)} such image(s) at the top "
            f"of {_INPUT_PARAMETER}); move each image into a folder named for its class: "
            f"<class name>/{loose[0][0]}"
        )
    if others:
        raise DataKindError(
            f"{others[0]} is not a {'/'.join(IMAGE_EXTENSIONS)} image but sits in the image tree "
            f"({len(others)} such file(s)); convert it to JPEG/PNG or move it out of {_INPUT_PARAMETER}"
        )
    return KIND_IMAGE


def class_of(key: str) -> str:
    """An image's class: the first folder of its key below InputDataUri."""
    return key.strip("/").split("/", 1)[0]


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _show(keys: list[str]) -> str:
    return ", ".join(keys[:_SHOWN]) + (f", ... {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")
