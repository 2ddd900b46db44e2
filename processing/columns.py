"""A CSV of typed columns: each column's type, the rows' labels, and the train split's
statistics and vocabularies, in two streaming passes over the file.

A column is numeric when every non-missing value parses as a number, else categorical;
missing is ``rawdata.MISSING`` (empty, NA, N/A, NaN, null, ?; any case). The label column
(LabelColumn) may hold any values: the classes are their sorted distinct values. What is held
in memory per row is its class id (4 bytes); per column, a categorical's train counts (up to
``MAX_TRACKED`` distinct values) or a numeric's sums. Every refusal is a ``DataError`` naming
the file, row or column and the fix. Standard library and NumPy only; Python 3.10 syntax.
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from processing.contract import LABEL_COLUMN_PARAMETER
from processing.rawdata import MISSING, DataError, label_classes

NUMERIC = "numeric"
CATEGORICAL = "categorical"
HASHED = "hashed"  # a categorical column with more than MAX_VOCABULARY distinct train values
# A categorical column with more distinct train values than this is hashed into HASH_BINS
# buckets (each an embedding row learned in training) instead of a vocabulary.
MAX_VOCABULARY = 1000
HASH_BINS = 4096
# Distinct values counted per categorical column at most (bounds memory on ID-like columns).
MAX_TRACKED = 100_000
# A categorical column whose train values are all distinct (over at least this many rows) is
# ID-like: it can only be memorised, so it is dropped (and said so).
ID_LIKE_MIN_ROWS = 20
_ENCODING = "utf-8-sig"
_MISSING = frozenset(MISSING)


def missing(cell: str) -> bool:
    return cell.strip().lower() in _MISSING


def column_key(name: str, index: int, taken: set[str]) -> str:
    """The column's record key and model input name: ``name`` reduced to [A-Za-z0-9_] (what
    a SavedModel signature's input names allow), unique within the table."""
    key = re.sub(r"[^A-Za-z0-9_]+", "_", name.strip()).strip("_") or f"column_{index + 1}"
    if not key[0].isalpha():
        key = f"c_{key}"
    base, n = key, 2
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    taken.add(key)
    return key


@dataclass
class Scan:
    """What pass 1 learns: the header, the label column, each feature column's type, the
    rows kept (label present) and their class ids."""

    path: str
    header: list[str]
    label_index: int
    numeric: list[bool]  # per header column (the label's entry unused)
    all_missing: list[bool]
    class_names: tuple[str, ...] | None
    y: np.ndarray  # int64 class ids of the rows kept
    dropped_rows: int = 0
    features: list[int] = field(default_factory=list)  # header indices of the feature columns


def rows(path: str, width: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of every data row; blank lines skipped; a ragged row refused."""
    try:
        with open(path, newline="", encoding=_ENCODING) as f:
            reader = csv.reader(f)
            next(reader)
            for row in reader:
                if not row:
                    continue
                if len(row) != width:
                    raise DataError(
                        f"{path} line {reader.line_num} has {len(row)} fields but the header has "
                        f"{width}; every row needs one value per column (quote values holding commas)"
                    )
                yield reader.line_num, row
    except UnicodeDecodeError as e:
        raise DataError(f"cannot read {path} as a UTF-8 CSV file ({e.reason}); export it as "
                        f"comma-separated text with a header row") from None


def scan(path: str, header: list[str], label_index: int, min_classes: int = 2) -> Scan:
    """Pass 1: column types and the labels (rows with a missing label dropped and counted)."""
    width = len(header)
    numeric = [True] * width
    all_missing = [True] * width
    label_ids: dict[str, int] = {}
    ids = array("i")
    dropped, first_dropped = 0, None
    for line, row in rows(path, width):
        label = row[label_index].strip()
        if missing(label):
            dropped += 1
            first_dropped = first_dropped or line
            continue
        ids.append(label_ids.setdefault(label, len(label_ids)))
        for i, cell in enumerate(row):
            if missing(cell):
                continue
            all_missing[i] = False
            if numeric[i]:
                try:
                    float(cell)
                except ValueError:
                    numeric[i] = False
    if not ids:
        raise DataError(f"{path} has a header but no records with a '{header[label_index]}' value; "
                        f"add records, or set {LABEL_COLUMN_PARAMETER} to the label column")
    if dropped:
        print(f"preprocess: {path}: dropped {dropped} row(s) whose '{header[label_index]}' is missing "
              f"(first at line {first_dropped})", flush=True)
    # Map first-seen ids to classes by name (sorted as label_classes sorts them).
    seen = np.array(list(label_ids), dtype=object).astype(str)
    names, mapped = label_classes(path, header[label_index], seen, min_classes)
    y = mapped[np.frombuffer(ids, dtype=np.int32)] if len(ids) else np.zeros(0, np.int64)
    features = [i for i in range(width) if i != label_index]
    for i in features:
        if all_missing[i]:
            raise DataError(
                f"{path}: column '{header[i]}' is missing in every row; remove the column or fill it in"
            )
    return Scan(path, header, label_index, numeric, all_missing, names, y.astype(np.int64), dropped, features)


class _NumericStats:
    def __init__(self) -> None:
        self.count = 0
        self.missing = 0
        self.total = 0.0
        self.total_sq = 0.0
        self.first: float | None = None
        self.constant = True

    def add(self, cell: str) -> None:
        if missing(cell):
            self.missing += 1
            return
        value = float(cell)
        if not math.isfinite(value):
            self.missing += 1  # inf: treated as missing (imputed), as the model treats it
            return
        self.count += 1
        self.total += value
        self.total_sq += value * value
        if self.first is None:
            self.first = value
        elif value != self.first:
            self.constant = False


class _CategoricalStats:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.rows = 0
        self.overflow = False  # more than MAX_TRACKED distinct values

    def add(self, cell: str) -> None:
        value = "" if missing(cell) else cell.strip()
        self.rows += 1
        if value in self.counts or not self.overflow:
            self.counts[value] += 1
            self.overflow = len(self.counts) > MAX_TRACKED


def train_statistics(scan: Scan, is_train: np.ndarray) -> tuple[list[dict], list[str]]:
    """Pass 2 (train rows only): per feature column its schema entry (name, key, type and
    statistics or vocabulary; ``dropped`` for single-valued and ID-like columns), and the
    log lines saying which columns were dropped or hashed. ``is_train``: per kept row."""
    stats = {i: _NumericStats() if scan.numeric[i] else _CategoricalStats() for i in scan.features}
    label = scan.label_index
    kept = 0
    for _, row in rows(scan.path, len(scan.header)):
        if missing(row[label]):
            continue
        if is_train[kept]:
            for i, s in stats.items():
                s.add(row[i])
        kept += 1
    schema, notes, taken = [], [], set()
    for i in scan.features:
        entry, note = _column_entry(scan.header[i], column_key(scan.header[i], i, taken), stats[i])
        schema.append(entry)
        if note:
            notes.append(f"preprocess: {scan.path}: column '{scan.header[i]}' {note}")
    return schema, notes


def _column_entry(name: str, key: str, s) -> tuple[dict, str | None]:
    if isinstance(s, _NumericStats):
        mean = s.total / s.count if s.count else 0.0
        variance = max(s.total_sq / s.count - mean * mean, 0.0) if s.count else 0.0
        entry = {"name": name, "key": key, "type": NUMERIC, "mean": mean,
                 "std": math.sqrt(variance) or 1.0, "missing_in_train": s.missing}
        if s.count == 0:
            return {**entry, "dropped": True}, "is missing in every training row: dropped"
        if s.constant and not s.missing:
            return {**entry, "dropped": True}, f"holds one value ({s.first:g}) in every training row: dropped"
        return entry, None
    values = sorted(s.counts)
    entry = {"name": name, "key": key, "type": CATEGORICAL, "missing_in_train": s.counts.get("", 0)}
    if len(values) == 1:
        return {**entry, "vocabulary": values, "dropped": True}, \
            f"holds one value ({values[0]!r}) in every training row: dropped"
    non_missing = s.rows - s.counts.get("", 0)
    if non_missing >= ID_LIKE_MIN_ROWS and all(c == 1 for v, c in s.counts.items() if v):
        return {**entry, "vocabulary": [], "dropped": True}, \
            f"is ID-like ({non_missing} training rows, every value distinct): dropped"
    if len(values) > MAX_VOCABULARY:
        return {**entry, "type": HASHED, "bins": HASH_BINS, "distinct": len(values)}, (
            f"has {'over ' if s.overflow else ''}{len(values)} distinct training values (> {MAX_VOCABULARY}): "
            f"hashed into {HASH_BINS} buckets, each a learned embedding"
        )
    # "" (missing) is always a value of its own, even when training never saw it missing.
    return {**entry, "vocabulary": sorted(set(values) | {""})}, None
