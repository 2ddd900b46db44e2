"""Where the time goes: each --compare variant takes one suspect out of the step."""

from __future__ import annotations

import math

import pytest

from benchmarks.training import mfu, train_variants


def test_a_variants_share_is_the_part_of_the_unchanged_step_it_took_away():
    # 100 samples/s unchanged, 125 without the input: the input was 20% of the step.
    assert mfu.share(100.0, 125.0) == pytest.approx(0.2)
    assert mfu.share(100.0, 80.0) == pytest.approx(-0.25)  # slower: a negative share
    assert math.isnan(mfu.share(100.0, float("nan"))) and math.isnan(mfu.share(0.0, 1.0))


def test_the_no_input_variant_runs_the_entrypoint_on_one_cached_batch():
    launch = mfu.VARIANTS["no_input"][1]()
    assert launch.entry == mfu.TRAIN_VARIANTS and launch.ranks == 1 and launch.batch_size == 2 * mfu.BATCH
    assert launch.env[train_variants.VARIANT_ENV] == "one_batch"


def test_one_batch_repeats_the_first_batch_for_every_step():
    tf = pytest.importorskip("tensorflow")
    seen = {}

    class Model:
        def fit(self, x=None, *args, **kwargs):
            seen["batches"] = [int(b.numpy()) for b in x.take(5)]
            seen["kwargs"] = kwargs

    real = tf.keras.Model
    try:
        tf.keras.Model = Model
        train_variants.patch({"one_batch"})
        Model().fit(tf.data.Dataset.range(3), steps_per_epoch=5)
    finally:
        tf.keras.Model = real
    assert seen == {"batches": [0, 0, 0, 0, 0], "kwargs": {"steps_per_epoch": 5}}
