"""The benchmarks' estimators: best-of-n and the choice of the fastest layout (no timing)."""

from __future__ import annotations

import math

from benchmarks import harness as h

NAN = float("nan")


def test_best_is_the_fastest_finite_repetition():
    assert h.best([100.0, NAN, 250.0, 90.0]) == 250.0
    assert h.best(iter([3.0])) == 3.0
    assert h.best([float("inf"), 5.0]) == 5.0  # a run that timed nothing is not the fastest
    assert math.isnan(h.best([])) and math.isnan(h.best([NAN, NAN]))


def test_best_shrugs_off_slow_repetitions_where_the_median_does_not():
    # Two of three repetitions disturbed (the 82k, 53k, 59k): the median follows them.
    runs = [82_000.0, 53_000.0, 59_000.0]
    assert h.best(runs) == 82_000.0
    assert h.median(runs) == 59_000.0


def test_best_layout_picks_the_layout_with_the_fastest_repetition():
    rates = {"one_process": [121.0, 118.0], "one_process_1thread": [90.0, 154.0],
             "one_process_cores": [130.0, 140.0]}
    assert h.best_layout(rates) == ("one_process_1thread", 154.0)


def test_best_layout_leaves_out_a_layout_whose_runs_all_failed():
    assert h.best_layout({"failed": [NAN], "ok": [10.0]}) == ("ok", 10.0)
    name, rate = h.best_layout({"failed": [NAN, NAN], "empty": []})
    assert name == "" and math.isnan(rate)


def test_interleave_rotates_so_no_candidate_always_runs_first():
    order: list[str] = []
    out = h.interleave({n: (lambda n=n: order.append(n) or len(order)) for n in "abc"}, 3)
    assert order == list("abc" "bca" "cab")
    assert out == {"a": [1, 6, 8], "b": [2, 4, 9], "c": [3, 5, 7]}


def test_train_seconds_leaves_out_the_epoch_that_traces_the_graph():
    run = h.TrainingRun("x", 0, 9.0, samples_per_sec={1: 10.0, 2: 100.0, 3: 50.0})
    # 100 records an epoch: epoch 2 took 1 s, epoch 3 2 s; epoch 1's 10 s of tracing is left out.
    assert run.train_seconds(100) == 3.0
    assert run.train_seconds(100, skip=0) == 13.0
