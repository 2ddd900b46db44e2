"""Find, read and check the one raw data file the PreprocessData step turns into shards.

Every refusal is a ``DataError`` whose message is one line naming the file and the fix: it
becomes the processing job's ExitMessage, which is all a pipeline user sees of a failed step.
NumPy and the standard library only; Python 3.10 syntax (SageMaker's TF 2.14 py310 image).
"""

from __future__ import annotations

import csv
import os
import warnings
import zipfile
from dataclasses import dataclass

import numpy as np

from processing.contract import (
    LABEL_COLUMN,
    LABEL_COLUMN_PARAMETER,
    RAW_SUFFIXES,
    DataKindError,
    table_splits,
)

# Shown in messages: the pipeline parameter that decides what lands in RAW_DATA_DIR (a test
# keeps it in step with pipeline/definition/parameters.py, which container code must not import).
INPUT_PARAMETER = "InputDataUri"
_LISTED_NAMES = 5
_ENCODING = "utf-8-sig"  # spreadsheet exports often start with a byte-order mark


class DataError(ValueError):
    """The raw data (or the way the step was asked to split it) cannot be used as given."""


class NotNumeric(Exception):
    """A CSV whose feature columns are not all finite numbers: read as typed columns
    (``processing.columns``), not as a float matrix."""


@dataclass(frozen=True)
class RawData:
    path: str
    x: np.ndarray  # (records, features) float32, all finite
    y: np.ndarray  # (records,) int64, labels 0..num_classes-1, every class present
    # The label values by class id when they were not already 0..K-1 (LabelColumn by name).
    class_names: tuple[str, ...] | None = None
    label_column: str | None = None

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def num_classes(self) -> int:
        return len(self.class_names) if self.class_names else int(self.y.max()) + 1


def find_raw_file(directory: str) -> str:
    """The single ``.csv``/``.npz`` below ``directory`` (searched recursively, because
    SageMaker copies every S3 key below the input prefix, sub-prefixes included)."""
    found, others = [], []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            (found if name.lower().endswith(RAW_SUFFIXES) else others).append(path)
    if not found:
        seen = f" (it holds only {_names(others)})" if others else ""
        raise DataError(
            f"no raw data: {directory} has no {' or '.join(RAW_SUFFIXES)} file{seen}; "
            f"point {INPUT_PARAMETER} at an S3 prefix holding exactly one such file"
        )
    if len(found) > 1:
        raise DataError(
            f"{len(found)} raw data files under {directory} ({_names(found)}); the step reads "
            f"exactly one: point {INPUT_PARAMETER} at a prefix holding a single .csv or .npz"
        )
    return found[0]


def find_split_files(directory: str) -> dict[str, str]:
    """Split -> raw file when the tables below ``directory`` are given splits (train.csv,
    validation.csv, test.csv or any alias; or inside split folders); {} for one table with
    no split name. ``DataError`` for a layout ``contract.table_splits`` refuses."""
    keys = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        relative = os.path.relpath(root, directory)
        keys += [name if relative == "." else f"{relative.replace(os.sep, '/')}/{name}"
                 for name in sorted(files) if not name.startswith(".") and name.lower().endswith(RAW_SUFFIXES)]
    try:
        given = table_splits([k.split("/") for k in keys])
    except DataKindError as e:
        raise DataError(f"{directory}: {e}") from None
    return {split: os.path.join(directory, *key.split("/")) for split, key in given.items()}


def _names(paths: list[str]) -> str:
    shown = ", ".join(os.path.basename(p) for p in paths[:_LISTED_NAMES])
    return shown + (f", ... {len(paths) - _LISTED_NAMES} more" if len(paths) > _LISTED_NAMES else "")


def load_raw(path: str, label_column: str = LABEL_COLUMN, min_classes: int = 2) -> RawData:
    """Read ``path`` (by its suffix) and check every record; raise ``DataError`` if unusable,
    ``NotNumeric`` for a CSV to read as typed columns.

    A CSV whose last column is ``label_column`` and holds integers 0..K-1 over finite
    numbers is read as it always was; one with the label elsewhere, or labels of any other
    values (the classes are then their sorted distinct values), over numeric features gives
    the same float matrix with ``class_names``."""
    if path.lower().endswith(".npz"):
        x, y = _read_npz(path)
        return RawData(path, _check_features(path, x), _check_labels(path, y))
    header = read_header(path)
    index = label_index(path, header, label_column)
    _refuse_typed_early(path, header, index)
    if index == len(header) - 1:
        try:
            x, y = _read_csv(path, header)
            return RawData(path, _check_features(path, x), _check_labels(path, y))
        except DataError:
            pass  # not today's numeric table: read the columns one by one below
    x = _numeric_features(path, header, index)
    labels = _read_column(path, index)
    keep = ~is_missing(labels)
    if not keep.all():
        print(f"preprocess: {path}: dropped {int((~keep).sum())} row(s) whose '{header[index]}' "
              f"is missing (first at data row {int(np.argmin(keep)) + 1})", flush=True)
    names, y = label_classes(path, header[index], labels[keep], min_classes)
    return RawData(path, _check_features(path, x[keep]), y, names, header[index])


MISSING = ("", "na", "n/a", "nan", "null", "?")
_PEEK_ROWS = 1000


def _refuse_typed_early(path: str, header: list[str], index: int) -> None:
    """``NotNumeric`` when the first rows already show a text or missing feature cell (or a
    ragged row): the float-matrix readers below hold the whole table, the typed reader streams."""
    with open(path, newline="", encoding=_ENCODING) as f:
        reader = csv.reader(f)
        next(reader, None)
        for number, row in enumerate(reader):
            if number >= _PEEK_ROWS:
                return
            if row and len(row) != len(header):
                raise NotNumeric(path)
            for i, cell in enumerate(row):
                if i == index:
                    continue
                if cell.strip().lower() in MISSING:
                    raise NotNumeric(path)
                try:
                    float(cell)
                except ValueError:
                    raise NotNumeric(path) from None


def is_missing(values: np.ndarray) -> np.ndarray:
    """Which (string) cells are missing: empty, NA, N/A, NaN, null or ?, any case."""
    lowered = np.char.lower(np.char.strip(np.asarray(values, dtype=str)))
    return np.isin(lowered, MISSING)


def label_index(path: str, header: list[str], label_column: str) -> int:
    if label_column not in header:
        raise DataError(
            f"{path} has no '{label_column}' column (header: {_clip(','.join(header), 200)}); set "
            f"-p {LABEL_COLUMN_PARAMETER}=<one of those names> to say which column holds the label"
        )
    if len(header) < 2:
        raise DataError(f"{path} has a '{label_column}' column but no feature columns; add at least one")
    return header.index(label_column)


def label_classes(
    path: str, column: str, labels: np.ndarray, min_classes: int = 2
) -> tuple[tuple[str, ...] | None, np.ndarray]:
    """(class names or None, class ids): integers 0..K-1 stay as they are (names None);
    other values become classes in sorted order (numerically when every value is a number)."""
    labels = np.char.strip(np.asarray(labels, dtype=str))
    distinct = np.unique(labels)
    if len(distinct) < min_classes or not len(distinct):
        raise DataError(
            f"{path}: every row has {column} = {_clip(str(distinct[0]) if len(distinct) else 'nothing')!r}; "
            f"a classifier needs at least 2 classes: check {LABEL_COLUMN_PARAMETER} names the label column"
        )
    try:
        numbers = distinct.astype(np.float64)
    except ValueError:
        numbers = None
    if numbers is not None:
        order = np.argsort(numbers, kind="stable")
        distinct, numbers = distinct[order], numbers[order]
        if np.array_equal(numbers, np.arange(len(numbers))):
            return None, labels.astype(np.float64).astype(np.int64)
    ids = {name: i for i, name in enumerate(distinct.tolist())}
    return tuple(ids), np.fromiter((ids[v] for v in labels.tolist()), dtype=np.int64, count=len(labels))


def _numeric_features(path: str, header: list[str], index: int) -> np.ndarray:
    columns = [i for i in range(len(header)) if i != index]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            x = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2, usecols=columns,
                           encoding=_ENCODING, comments=None, quotechar='"')
    except UnicodeDecodeError as e:
        raise DataError(_unreadable(path, e)) from None
    except (ValueError, IndexError):
        raise NotNumeric(path) from None
    if x.shape[0] == 0:
        raise DataError(f"{path} has a header but no records; add at least one record per class")
    if not np.isfinite(x).all():
        raise NotNumeric(path)  # NaN cells are missing values: the typed columns impute them
    return x


def _read_column(path: str, index: int) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return np.loadtxt(path, delimiter=",", skiprows=1, dtype=str, ndmin=1, usecols=[index],
                              encoding=_ENCODING, comments=None, quotechar='"')
    except (ValueError, IndexError):
        raise NotNumeric(path) from None  # a ragged row: the typed-columns reader names it


# --- CSV -------------------------------------------------------------------------------------
def _read_csv(path: str, header: list[str]) -> tuple[np.ndarray, np.ndarray]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": see below
            # NumPy's C parser: half the time and a fifth of the memory of csv + float() on a
            # 100 MB file. It does not say which cell it refused, so a failure is diagnosed
            # by a second, streaming pass that does.
            table = np.loadtxt(
                path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2,
                encoding=_ENCODING, comments=None, quotechar='"',
            )
    except UnicodeDecodeError as e:
        raise DataError(_unreadable(path, e)) from None
    except ValueError as e:
        raise DataError(_diagnose(path, header, e)) from None
    if table.shape[0] == 0:
        raise DataError(f"{path} has a header but no records; add at least one record per class")
    if table.shape[1] != len(header):  # every row short (or long) alike parses without error
        raise DataError(_diagnose(path, header, ValueError(f"{table.shape[1]} columns")))
    return table[:, :-1], table[:, -1]


def read_header(path: str) -> list[str]:
    try:
        with open(path, newline="", encoding=_ENCODING) as f:
            first = next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(_unreadable(path, e)) from None
    if first is None:
        raise DataError(f"{path} is empty; it needs a header row naming the columns, and records")
    return [name.strip() for name in first]


def _unreadable(path: str, error: BaseException) -> str:
    return (
        f"cannot read {path} as a UTF-8 CSV file ({_first_line(error)}); "
        f"export it as comma-separated text with a header row"
    )


def _diagnose(path: str, header: list[str], error: ValueError) -> str:
    """The first ragged row or non-number, by line and column: NumPy's message names neither
    reliably (its rows skip blank lines)."""
    with open(path, newline="", encoding=_ENCODING) as f:
        reader = csv.reader(f)
        next(reader)
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                return (
                    f"{path} line {reader.line_num} has {len(row)} fields but the header has "
                    f"{len(header)}; every row needs one value per column"
                )
            for column, value in zip(header, row, strict=True):
                try:
                    float(value)
                except ValueError:
                    return (
                        f"{path} line {reader.line_num}, column '{column}': {_clip(value)!r} is "
                        f"not a number; every feature and the '{LABEL_COLUMN}' must be numeric"
                    )
    return f"{path} is not a numeric CSV table ({_first_line(error)}); every column must be numeric"


# --- NPZ -------------------------------------------------------------------------------------
def _read_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        if not zipfile.is_zipfile(path):  # else np.load tries it as a pickle and says so
            raise ValueError("not a zip archive")
        with np.load(path, allow_pickle=False) as archive:
            missing = [name for name in ("x", "y") if name not in archive.files]
            if missing:
                raise DataError(
                    f"{path} has no array {' or '.join(repr(m) for m in missing)} (it holds "
                    f"{sorted(archive.files) or 'nothing'}); save it with np.savez(path, x=features, y=labels)"
                )
            x, y = archive["x"], archive["y"]
    except DataError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(
            f"cannot read {path} as an .npz archive ({_first_line(e)}); write it with "
            f"np.savez(path, x=features, y=labels) and no object arrays"
        ) from None
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
        raise DataError(
            f"{path}: x has shape {x.shape} and y {y.shape}; expected x (records, features) and "
            f"y (records,) with the same number of records"
        )
    if len(x) == 0 or x.shape[1] == 0:
        raise DataError(f"{path} holds no records or no features (x has shape {x.shape})")
    for name, array in (("x", x), ("y", y)):
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
            raise DataError(
                f"{path}: array {name!r} has dtype {array.dtype}, not numbers; "
                f"convert it to a numeric dtype before saving"
            )
    return x.astype(np.float64), y


# --- Checks shared by both formats -----------------------------------------------------------
def _check_features(path: str, x: np.ndarray) -> np.ndarray:
    bad = ~np.isfinite(x)
    if bad.any():
        record, feature = (int(i) for i in np.argwhere(bad)[0])
        raise DataError(
            f"{path}: record {record + 1}, feature {feature + 1} is {x[record, feature]} "
            f"({int(bad.sum())} non-finite value(s) in all); remove or impute NaN/inf values"
        )
    # Examples store float32: a float64 beyond its range would silently become inf.
    with np.errstate(over="ignore"):  # the overflow is what we look for, not a warning
        x32 = x.astype(np.float32)
    overflow = ~np.isfinite(x32)
    if overflow.any():
        record, feature = (int(i) for i in np.argwhere(overflow)[0])
        raise DataError(
            f"{path}: record {record + 1}, feature {feature + 1} = {x[record, feature]:g} does not "
            f"fit in float32 (|x| < 3.4e38); rescale the feature"
        )
    return x32


def _check_labels(path: str, y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    if y.dtype == np.bool_:
        y = y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.integer):
        finite = np.isfinite(y)
        integral = finite & (y == np.round(y))
        if not integral.all():
            record = int(np.argmin(integral))
            raise DataError(
                f"{path}: record {record + 1} has label {y[record]}, not an integer; "
                f"labels must be class numbers 0..K-1"
            )
    labels = y.astype(np.int64)
    if labels.min() < 0:
        record = int(np.argmin(labels))
        raise DataError(
            f"{path}: record {record + 1} has label {labels[record]}; labels must be class "
            f"numbers 0..K-1, renumber them from 0"
        )
    present = np.unique(labels)
    if len(present) < 2:
        raise DataError(
            f"{path}: every record has label {present[0]}; a classifier needs at least 2 classes"
        )
    # A gap (e.g. labels 1..10) would give the softmax a class with no records to learn or
    # to stratify; renumbering is the user's call, not ours.
    absent = sorted(set(range(int(present[-1]) + 1)) - set(present.tolist()))
    if absent:
        raise DataError(
            f"{path}: no record has label {_clip(', '.join(map(str, absent)))} (labels found: "
            f"{present[0]}..{present[-1]}); renumber the classes as 0..K-1 with no gaps"
        )
    return labels


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return _clip(text[0] if text else type(error).__name__)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
