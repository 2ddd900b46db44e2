"""The knee of a scaling curve is found where it is."""

from __future__ import annotations

import pytest

from pipeline.costs.advisor.knee import knee


def test_knee_of_a_synthetic_curve_is_where_the_added_worker_stops_paying():
    # Linear to 4 workers (each adds 100 = its share), then each adds 30 (< half a share).
    workers = list(range(1, 9))
    throughput = [100, 200, 300, 400, 430, 460, 490, 520]
    assert knee(workers, throughput, 0.5) == 4
    # A stricter buyer (each worker must add 90% of a share) stops at the same place; a
    # lenient one (25%) keeps going to the end.
    assert knee(workers, throughput, 0.9) == 4
    assert knee(workers, throughput, 0.25) == 8


def test_knee_with_gaps_compares_the_gain_per_added_worker():
    # 1, 2, 4, 8 workers: 4 -> 8 adds 160 over 4 workers = 40 each < 50.
    assert knee([1, 2, 4, 8], [100, 190, 360, 520], 0.5) == 4


def test_amdahl_curve_knee_matches_the_closed_form():
    # Amdahl with serial fraction s: T(n) = n / (1 + s (n - 1)) x T(1). The added worker's gain
    # falls below half a share at the first n where T(n) - T(n-1) < 0.5.
    s = 0.1
    workers = list(range(1, 33))
    curve = [n / (1 + s * (n - 1)) for n in workers]
    expected = next(n - 1 for n in workers[1:] if curve[n - 1] - curve[n - 2] < 0.5)
    assert knee(workers, curve, 0.5) == expected == 4  # gains .82 .68 .58 then .49


def test_a_curve_must_start_at_one_worker():
    with pytest.raises(ValueError):
        knee([2, 4], [1.0, 2.0])
