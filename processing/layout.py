"""Data published with its splits: the tables of given splits read as one data set, and the
split order (given splits kept as they are, missing ones carved from train).

NumPy only; Python 3.10 syntax (SageMaker's TF 2.14 py310 image).
"""

from __future__ import annotations

import os

import numpy as np

from processing.rawdata import DataError, RawData, label_classes, load_raw
from processing.split import SPLITS, absent_classes, describe_origin, given_split, stratified_split


def load_given_tables(files: dict[str, str], label_column: str) -> tuple[RawData, dict[str, np.ndarray]]:
    """One ``RawData`` of every given split's table (in ``SPLITS`` order) and split -> its
    records' indices. The classes are the union of the splits' label values (sorted as
    ``label_classes`` sorts them); every table must have the same features."""
    parts = [(split, load_raw(files[split], label_column, min_classes=1)) for split in SPLITS if split in files]
    first = parts[0][1]
    for _, data in parts[1:]:
        if data.num_features != first.num_features:
            raise DataError(
                f"{data.path} has {data.num_features} feature columns but {first.path} has "
                f"{first.num_features}; every split's table needs the same columns"
            )
    names = [_names_of(data) for _, data in parts]
    labels = np.concatenate([np.asarray(n, dtype=object)[data.y] for n, (_, data) in zip(names, parts, strict=True)])
    class_names, y = label_classes(os.path.dirname(first.path), first.label_column or "label", labels.astype(str))
    given, start = {}, 0
    for split, data in parts:
        given[split] = np.arange(start, start + len(data.y))
        start += len(data.y)
    x = np.concatenate([data.x for _, data in parts])
    return RawData(first.path, x, y, class_names, first.label_column), given


def _names_of(data: RawData) -> tuple[str, ...]:
    return data.class_names or tuple(str(i) for i in range(int(data.y.max()) + 1))


def split_order(
    labels: np.ndarray,
    given: dict[str, np.ndarray] | None,
    class_names: tuple[str, ...],
    args,
    source: str,
) -> tuple[dict[str, np.ndarray], dict[str, str] | None]:
    """(split -> record indices, split -> "given"/"carved" or None without given splits);
    prints which splits were given and carved, and classes a given split lacks."""
    if not given:
        return stratified_split(labels, args.validation_fraction, args.test_fraction, args.seed, source=source), None
    order, origin = given_split(
        labels, given, class_names, args.validation_fraction, args.test_fraction, args.seed, source
    )
    print(describe_origin(origin, {name: len(order[name]) for name in SPLITS}, source), flush=True)
    for line in absent_classes(labels, order, class_names):
        print(line, flush=True)
    return order, origin
