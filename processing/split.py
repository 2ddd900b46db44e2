"""Seeded stratified train/validation/test split, and records per shard.

Pure functions of (labels, fractions, seed): every processing host computes the same split
without talking to the others, which is what lets each host write only its own shards.
NumPy only; Python 3.10 syntax.
"""

from __future__ import annotations

import math

import numpy as np

from processing.contract import SPLITS
from processing.rawdata import DataError

TRAIN, VALIDATION, TEST = SPLITS
# Every class must reach every split: evaluation reports per class, and a validation set
# missing a class would hide that the model never sees it.
MIN_RECORDS_PER_CLASS = len(SPLITS)
# Named in messages: the pipeline parameters that set the shard count (a test keeps them in
# step with pipeline/definition/parameters.py, which this container code must not import).
WORKER_PARAMETERS = ("TrainingInstanceCount", "ProcessesPerHost")


def check_fractions(validation_fraction: float, test_fraction: float) -> None:
    for name, value in (("validation", validation_fraction), ("test", test_fraction)):
        if not 0.0 < value < 1.0:
            raise DataError(f"--{name}-fraction {value} must be between 0 and 1 (exclusive)")
    if validation_fraction + test_fraction >= 1.0:
        raise DataError(
            f"--validation-fraction {validation_fraction} + --test-fraction {test_fraction} "
            f"leaves nothing to train on; keep their sum below 1"
        )


def stratified_split(
    labels: np.ndarray,
    validation_fraction: float,
    test_fraction: float,
    seed: int,
    source: str = "the raw data",
) -> dict[str, np.ndarray]:
    """Split name -> record indices, each split holding every class in proportion.

    Split sizes are round(fraction x records) wherever the classes are large enough (largest
    remainder across classes), each class having at least one record in every split. Every
    split's order is shuffled with ``seed``: raw files are often sorted by label, and the
    shards are contiguous runs of this order.
    """
    check_fractions(validation_fraction, test_fraction)
    classes, counts = np.unique(labels, return_counts=True)
    small = counts < MIN_RECORDS_PER_CLASS
    if small.any():
        i = int(np.argmax(small))
        raise DataError(
            f"{source}: class {classes[i]} has {counts[i]} record(s), too few to stratify into "
            f"{'/'.join(SPLITS)}; each class needs at least {MIN_RECORDS_PER_CLASS}: "
            f"add records of that class or drop it"
        )
    test = _apportion(counts, test_fraction, cap=counts - 2)
    validation = _apportion(counts, validation_fraction, cap=counts - test - 1)
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in SPLITS}
    for label, n_test, n_validation in zip(classes, test, validation, strict=True):
        members = rng.permutation(np.flatnonzero(labels == label))
        parts[TEST].append(members[:n_test])
        parts[VALIDATION].append(members[n_test : n_test + n_validation])
        parts[TRAIN].append(members[n_test + n_validation :])
    return {name: rng.permutation(np.concatenate(parts[name])) for name in SPLITS}


def _apportion(counts: np.ndarray, fraction: float, cap: np.ndarray) -> np.ndarray:
    """Records per class for one split: ``fraction`` of each class, at least 1, at most
    ``cap``, summing to round(fraction x total) when the floor and caps allow it."""
    quotas = counts * fraction
    taken = np.clip(np.floor(quotas).astype(np.int64), 1, cap)
    remaining = math.floor(fraction * int(counts.sum()) + 0.5) - int(taken.sum())
    # Largest remainder first; a stable sort keeps ties in class order (deterministic).
    for i in np.argsort(-(quotas - np.floor(quotas)), kind="stable"):
        if remaining <= 0:
            break
        if taken[i] < cap[i]:
            taken[i] += 1
            remaining -= 1
    return taken


def shard_sizes(records: int, shards: int) -> list[int]:
    """Records per shard, equal +-1 (the first ``records % shards`` shards get one more), so
    ranks run the same number of steps give or take one batch."""
    base, extra = divmod(records, shards)
    return [base + 1 if i < extra else base for i in range(shards)]


def shard_bounds(records: int, shards: int) -> list[tuple[int, int]]:
    """(start, stop) of each shard's contiguous run of the split's order."""
    bounds, start = [], 0
    for size in shard_sizes(records, shards):
        bounds.append((start, start + size))
        start += size
    return bounds


def check_shards_fit(
    split_sizes: dict[str, int], shards: int, reason: str, source: str, unit: str = "records"
) -> None:
    """Refuse an empty shard: its rank (or a whole ShardedByS3Key host) would get no data."""
    name, smallest = min(split_sizes.items(), key=lambda item: item[1])
    if smallest < shards:
        raise DataError(
            f"{source}: the {name} split gets {smallest} {unit} but {shards} shards are needed "
            f"({reason}); use fewer training workers ({' x '.join(WORKER_PARAMETERS)}) or more data"
        )


# --- Given splits ----------------------------------------------------------------------------
def given_split(
    labels: np.ndarray,
    given: dict[str, np.ndarray],
    class_names: tuple[str, ...],
    validation_fraction: float,
    test_fraction: float,
    seed: int,
    source: str = "the raw data",
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(split name -> record indices, split name -> "given" or "carved") for data published
    with its splits: ``given`` maps each given split to its records' indices. A missing
    validation or test split is carved from train, seeded and stratified as
    ``stratified_split``; no record moves between given splits. Every split's order is
    shuffled with ``seed``. Raises ``DataError`` for a class with no training record, or a
    training split whose classes are too small to carve from."""
    if TRAIN not in given:
        raise DataError(
            f"{source}: given splits {', '.join(sorted(given))} but no train split; add a train "
            f"split (train/ or train.csv) holding examples of every class"
        )
    train = given[TRAIN]
    present = np.bincount(labels[train], minlength=len(class_names))
    for split, indices in sorted(given.items()):
        seen = np.bincount(labels[indices], minlength=len(class_names))
        orphan = np.flatnonzero((seen > 0) & (present == 0))
        if len(orphan):
            raise DataError(
                f"{source}: class '{class_names[orphan[0]]}' has {int(seen[orphan[0]])} example(s) in "
                f"the {split} split but none in train; add training examples of it or remove it "
                f"from {split}"
            )
    carve = [name for name in (VALIDATION, TEST) if name not in given]
    rng = np.random.default_rng(seed)
    origin = {name: ("given" if name in given else "carved") for name in SPLITS}
    if len(carve) == 2:
        parts = stratified_split(labels[train], validation_fraction, test_fraction, seed, source)
        order = {name: train[parts[name]] for name in SPLITS}
    else:
        order = {name: rng.permutation(given[name]) for name in given}
        if carve:
            fraction = validation_fraction if carve[0] == VALIDATION else test_fraction
            kept, carved = _carve(labels[train], fraction, rng, source, carve[0])
            order[TRAIN], order[carve[0]] = train[kept], train[carved]
    return {name: order[name] for name in SPLITS}, origin


def _carve(labels: np.ndarray, fraction: float, rng, source: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Two stratified parts of one split: (the rest, ``fraction`` of each class), shuffled."""
    classes, counts = np.unique(labels, return_counts=True)
    small = counts < 2
    if small.any():
        i = int(np.argmax(small))
        raise DataError(
            f"{source}: class {classes[i]} has {counts[i]} training record(s), too few to carve a "
            f"{name} split from; give a {name} split or add training records of that class"
        )
    taken = _apportion(counts, fraction, cap=counts - 1)
    kept, carved = [], []
    for label, n in zip(classes, taken, strict=True):
        members = rng.permutation(np.flatnonzero(labels == label))
        carved.append(members[:n])
        kept.append(members[n:])
    return rng.permutation(np.concatenate(kept)), rng.permutation(np.concatenate(carved))


def describe_origin(origin: dict[str, str], sizes: dict[str, int], source: str) -> str:
    """The one line saying which splits were given and which carved from train."""
    given = [name for name in SPLITS if origin[name] == "given"]
    carved = [name for name in SPLITS if origin[name] == "carved"]
    return (
        f"preprocess: {source}: splits given: {', '.join(given)}"
        + (f"; carved from train (seeded, stratified): {', '.join(carved)}" if carved else "; none carved")
        + f" -> {', '.join(f'{name} {sizes[name]}' for name in SPLITS)}"
    )


def absent_classes(labels: np.ndarray, order: dict[str, np.ndarray], class_names: tuple[str, ...]) -> list[str]:
    """One line per given evaluation split that lacks a class (evaluation reports it with support 0)."""
    lines = []
    for split in (VALIDATION, TEST):
        seen = np.bincount(labels[order[split]], minlength=len(class_names))
        missing = [class_names[i] for i in np.flatnonzero(seen == 0)]
        if missing:
            lines.append(
                f"preprocess: the given {split} split has no example of class(es) "
                f"{', '.join(repr(m) for m in missing)}; they are trained on and reported with support 0"
            )
    return lines
