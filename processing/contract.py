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
# Given splits: a folder (images, or tables inside it) or a table file's stem whose name,
# case-insensitive, is one of these is that split (torchvision, Kaggle and Hugging Face names).
SPLIT_ALIASES = {
    "train": "train", "training": "train",
    "val": "validation", "valid": "validation", "validation": "validation", "dev": "validation",
    "test": "test", "testing": "test", "eval": "test",
}
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
ARG_LABEL_COLUMN = "--label-column"

# Image trees: the training size (ImageSize) and how the records hold the images. "resized":
# an image larger than the training size is stored with its short side at ImageSize x
# RESIZE_MARGIN (aspect kept; room for a crop augmentation), re-encoded as JPEG at
# RESIZED_JPEG_QUALITY: decoding costs per stored pixel, and every epoch decodes every image
# (benchmarks/input/resized_records.py measures it). "original": the files' bytes unchanged.
# Without --image-size (a definition that does not pass it) the originals are kept.
ARG_IMAGE_SIZE = "--image-size"
ARG_IMAGE_RECORDS = "--image-records"
IMAGE_RECORDS_RESIZED = "resized"
IMAGE_RECORDS_ORIGINAL = "original"
IMAGE_RECORDS = (IMAGE_RECORDS_RESIZED, IMAGE_RECORDS_ORIGINAL)
DEFAULT_IMAGE_RECORDS = IMAGE_RECORDS_RESIZED
# ImageSize 0: the training job picks the architecture's own size, which processing does not know;
# the images are stored for the largest it can pick.
AUTO_IMAGE_SIZE = 0  # = training_entry.contract.AUTO_IMAGE_SIZE (a test keeps them equal)
AUTO_STORED_IMAGE_SIZE = 224  # = training_entry.contract.PRETRAINED_IMAGE_SIZE (a test keeps them equal)
RESIZE_MARGIN = 1.125  # = training_entry.input.images.CROP_MARGIN (a test keeps them equal)
RESIZED_JPEG_QUALITY = 90

DEFAULT_SEED = 42
DEFAULT_VALIDATION_FRACTION = 0.15
DEFAULT_TEST_FRACTION = 0.15

# Raw input formats the script accepts (one file in RAW_DATA_DIR, or one per given split):
# CSV with a header naming the label column (LabelColumn, any position), or NPZ with arrays
# "x" (n, features) and "y" (n,).
RAW_SUFFIXES = (".csv", ".npz")
LABEL_COLUMN = "label"  # LabelColumn's default
# Named in messages (pipeline/definition/parameters.py defines it; a test keeps them equal).
LABEL_COLUMN_PARAMETER = "LabelColumn"

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
    files next to images, images outside a class folder, other files in an image tree, or a
    refused split layout (``given_splits``).
    """
    tables, images, others = _sorted_keys(keys)
    if tables and images:
        raise DataKindError(
            f"{_INPUT_PARAMETER} mixes table data ({_show(tables)}) with {len(images)} image(s) "
            f"(e.g. {'/'.join(images[0])}); point it at a prefix holding either one "
            f"{' or '.join(RAW_SUFFIXES)} file or an image tree <class name>/<image>"
        )
    if tables:
        table_splits([t.strip("/").split("/") for t in tables])
        return KIND_TABLE
    if not images:
        seen = f" (it holds only {_show(others)})" if others else " (it is empty)"
        raise DataKindError(
            f"no raw data under {_INPUT_PARAMETER}{seen}; point it at a prefix holding one "
            f"{' or '.join(RAW_SUFFIXES)} file or an image tree <class name>/<image> "
            f"({'/'.join(IMAGE_EXTENSIONS)})"
        )
    given = image_splits(images)
    loose = [parts for parts in images if len(parts) == 1]
    if loose:
        raise DataKindError(
            f"image {loose[0][0]} is not in a class folder ({len(loose)} such image(s) at the top "
            f"of {_INPUT_PARAMETER}); move each image into a folder named for its class: "
            f"<class name>/{loose[0][0]}"
        )
    if given:
        direct = [parts for parts in images if len(parts) == 2]
        if direct:
            raise DataKindError(
                f"image {'/'.join(direct[0])} sits directly in split folder {direct[0][0]}/ "
                f"({len(direct)} such image(s)); a split folder holds class folders: move it to "
                f"{direct[0][0]}/<class name>/{direct[0][1]}"
            )
    if others:
        raise DataKindError(
            f"{others[0]} is not a {'/'.join(IMAGE_EXTENSIONS)} image but sits in the image tree "
            f"({len(others)} such file(s)); convert it to JPEG/PNG or move it out of {_INPUT_PARAMETER}"
        )
    return KIND_IMAGE


def _sorted_keys(keys: Iterable[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """(table keys, image keys as parts, other keys), hidden entries left out."""
    tables, images, others = [], [], []
    for key in keys:
        parts = [p for p in key.strip("/").split("/") if p]
        if not parts or any(p.startswith(".") for p in parts):
            continue
        suffix = _suffix(parts[-1])
        if suffix in RAW_SUFFIXES:
            tables.append("/".join(parts))
        elif suffix in IMAGE_EXTENSIONS:
            images.append(parts)
        else:
            others.append(key)
    return tables, images, others


def split_of(name: str) -> str | None:
    """The split a folder name (or a file's stem) names, case-insensitive; None if none."""
    return SPLIT_ALIASES.get(name.strip().lower())


def image_splits(images: list[list[str]]) -> bool:
    """Whether an image tree's top level is given splits (every top folder a split name).
    ``DataKindError`` for a top level that mixes split folders with other folders."""
    folders = sorted({parts[0] for parts in images if len(parts) > 1})
    named = [f for f in folders if split_of(f)]
    if not named:
        return False
    other = [f for f in folders if not split_of(f)]
    if other:
        raise DataKindError(
            f"{_INPUT_PARAMETER} mixes split folders ({', '.join(f + '/' for f in named)}) with other "
            f"folders ({_show([f + '/' for f in other])}); either put every class folder inside "
            f"split folders (train/<class>/, val/<class>/) or use no split folders at all"
        )
    by_split: dict[str, list[str]] = {}
    for folder in named:
        by_split.setdefault(split_of(folder), []).append(folder)
    _refuse_duplicate_splits({s: [f + "/" for f in fs] for s, fs in by_split.items()})
    return True


def table_splits(tables: list[list[str]]) -> dict[str, str]:
    """Split -> table key when the table files are given splits (``train.csv``,
    ``validation.csv``, ``test.csv``, under any alias, or any table inside a split folder);
    {} for one table with no split name (read as today). ``DataKindError`` for several tables
    that are not all given splits, or two tables for one split."""
    by_split: dict[str, list[str]] = {}
    unnamed = []
    for parts in tables:
        split = split_of(parts[0]) if len(parts) > 1 else None
        split = split or split_of(_stem(parts[-1]))
        if split:
            by_split.setdefault(split, []).append("/".join(parts))
        else:
            unnamed.append("/".join(parts))
    if not by_split:
        if len(unnamed) > 1:
            raise DataKindError(
                f"{len(unnamed)} table files under {_INPUT_PARAMETER} ({_show(unnamed)}); point it at a "
                f"prefix holding one, or name them for their splits (train.csv, validation.csv, test.csv)"
            )
        return {}
    if unnamed:
        raise DataKindError(
            f"{_INPUT_PARAMETER} holds split tables ({_show(sorted(k for v in by_split.values() for k in v))}) "
            f"and {_show(unnamed)}, which names no split; rename it train/validation/test.csv or move it out"
        )
    _refuse_duplicate_splits(by_split)
    return {split: keys[0] for split, keys in by_split.items()}


def _refuse_duplicate_splits(by_split: dict[str, list[str]]) -> None:
    for split, names in sorted(by_split.items()):
        if len(names) > 1:
            raise DataKindError(
                f"{_INPUT_PARAMETER} gives the {split} split twice ({', '.join(sorted(names))}); "
                f"keep one of them"
            )


def class_of(key: str, given_splits: bool = False) -> str:
    """An image's class: the first folder of its key below InputDataUri (below its split
    folder when the tree has given splits)."""
    parts = key.strip("/").split("/")
    return parts[1] if given_splits else parts[0]


def image_classes(keys: Iterable[str]) -> tuple[str, ...]:
    """The sorted class names of an image tree's listing (the union over given splits):
    what the training job's model will output, known before any job starts."""
    _, images, _ = _sorted_keys(keys)
    given = image_splits(images)
    return tuple(sorted({class_of("/".join(p), given) for p in images if len(p) > (2 if given else 1)}))


def _stem(name: str) -> str:
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _show(keys: list[str]) -> str:
    return ", ".join(keys[:_SHOWN]) + (f", ... {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")
