"""benchmarks/advisor/advisor_probe.py: how its timings become the figures P5 fits (no timing asserted)."""

from __future__ import annotations

import pytest

pytest.importorskip("horovod.tensorflow")

from benchmarks.advisor.advisor_probe import fastest_window  # noqa: E402


def test_a_slow_spell_does_not_move_the_figure_a_window_of_quiet_calls_gives():
    quiet, slow = [0.30] * 20, [0.60] * 20
    # The median of every call follows the spell once it is half the probe or more.
    assert fastest_window(slow + quiet + slow, size=20) == pytest.approx(0.30)
    # A single lucky call is not a window: the figure stays the quiet stretch's.
    assert fastest_window(slow + [0.05] + quiet[1:] + slow, size=20) == pytest.approx(0.30)


def test_fewer_calls_than_a_window_give_their_median():
    assert fastest_window([0.4, 0.1, 0.3], size=20) == pytest.approx(0.3)
