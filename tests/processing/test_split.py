"""The stratified split and records per shard: pure functions, no files."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.data.default import DIGITS_RECORDS
from processing.contract import DEFAULT_TEST_FRACTION, DEFAULT_VALIDATION_FRACTION, SPLITS
from processing.rawdata import DataError
from processing.split import (
    check_fractions,
    check_shards_fit,
    shard_bounds,
    shard_sizes,
    stratified_split,
)


def digits_labels() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().target


def test_split_sizes_are_the_fractions_and_cover_every_record_once():
    labels = digits_labels()
    split = stratified_split(labels, 0.15, 0.15, seed=42)
    assert [len(split[s]) for s in SPLITS] == [1797 - 270 - 270, 270, 270]  # round(0.15 x 1797)
    every = np.concatenate([split[s] for s in SPLITS])
    assert sorted(every.tolist()) == list(range(len(labels)))


@pytest.mark.parametrize("validation, test", [(0.15, 0.15), (0.1, 0.3), (0.25, 0.05)])
def test_every_class_is_split_in_proportion(validation, test):
    labels = digits_labels()
    split = stratified_split(labels, validation, test, seed=1)
    class_counts = np.bincount(labels)
    for name, fraction in (("validation", validation), ("test", test)):
        in_split = np.bincount(labels[split[name]], minlength=len(class_counts))
        # Largest remainder: each class gets floor or ceil of its exact share.
        assert np.all(np.abs(in_split - class_counts * fraction) < 1), name


def test_tiny_classes_still_reach_every_split():
    labels = np.array([0] * 50 + [1] * 3 + [2] * 4)
    split = stratified_split(labels, 0.15, 0.15, seed=0)
    for name in SPLITS:
        assert set(labels[split[name]]) == {0, 1, 2}, name


def test_large_fractions_leave_each_class_a_training_record():
    labels = np.array([0] * 3 + [1] * 3)
    split = stratified_split(labels, 0.45, 0.45, seed=0)
    assert [sorted(labels[split[s]]) for s in SPLITS] == [[0, 1]] * 3


def test_class_too_small_to_stratify_is_refused():
    labels = np.array([0] * 10 + [1] * 2)
    with pytest.raises(DataError, match=r"raw.csv: class 1 has 2 record\(s\), too few to stratify"):
        stratified_split(labels, 0.15, 0.15, seed=0, source="raw.csv")


def test_same_seed_same_split_other_seed_other_order():
    labels = digits_labels()
    a, b = stratified_split(labels, 0.15, 0.15, 7), stratified_split(labels, 0.15, 0.15, 7)
    c = stratified_split(labels, 0.15, 0.15, 8)
    assert all(np.array_equal(a[s], b[s]) for s in SPLITS)
    assert not np.array_equal(a["train"], c["train"])


def test_train_order_is_shuffled_not_grouped_by_class():
    labels = np.repeat(np.arange(5), 40)
    train = labels[stratified_split(labels, 0.15, 0.15, seed=3)["train"]]
    assert not np.all(np.diff(train) >= 0)
    # The first shard of 4 must not be a block of one or two classes.
    assert len(set(train[: len(train) // 4])) == 5


@pytest.mark.parametrize("records, shards", [(10, 1), (10, 3), (270, 8), (7, 7), (1257, 24), (45, 44)])
def test_shard_sizes_are_equal_within_one(records, shards):
    sizes = shard_sizes(records, shards)
    assert len(sizes) == shards and sum(sizes) == records
    assert max(sizes) - min(sizes) <= 1
    bounds = shard_bounds(records, shards)
    assert bounds[0][0] == 0 and bounds[-1][1] == records
    assert all(stop == start for (_, stop), (start, _) in zip(bounds, bounds[1:], strict=False))


def test_a_split_smaller_than_the_shard_count_is_refused():
    check_shards_fit({"train": 100, "validation": 8, "test": 9}, 8, "2 x 4", "raw.csv")
    with pytest.raises(DataError, match=r"raw.csv: the validation split gets 8 records but 9 shards"):
        check_shards_fit({"train": 100, "validation": 8, "test": 9}, 9, "3 x 3", "raw.csv")


@pytest.mark.parametrize(
    "validation, test, message",
    [(0.0, 0.2, "between 0 and 1"), (0.2, 1.0, "between 0 and 1"), (0.5, 0.5, "nothing to train on")],
)
def test_impossible_fractions_are_refused(validation, test, message):
    with pytest.raises(DataError, match=message):
        check_fractions(validation, test)


def test_default_data_splits_fit_every_shard_count_the_pipeline_accepts():
    """pipeline.definition.parameters.check_shards_fit lets through up to int(records x min fraction)
    shards on the default data; processing must be able to fill that many."""
    split = stratified_split(
        digits_labels(), DEFAULT_VALIDATION_FRACTION, DEFAULT_TEST_FRACTION, seed=42
    )
    accepted = int(DIGITS_RECORDS * min(DEFAULT_TEST_FRACTION, DEFAULT_VALIDATION_FRACTION))
    assert min(len(indices) for indices in split.values()) >= accepted


def test_parameter_names_in_messages_are_the_pipelines():
    from pipeline.definition import parameters
    from processing import rawdata, split

    assert rawdata.INPUT_PARAMETER == parameters.INPUT_DATA_URI
    assert split.WORKER_PARAMETERS == (parameters.TRAINING_INSTANCE_COUNT, parameters.PROCESSES_PER_HOST)
