"""How the recommendation says a run's length."""

from __future__ import annotations

import pytest

from pipeline.costs.advisor.recommend import duration


@pytest.mark.parametrize(("hours", "text"), [
    (10 / 3600, "10.0 s"), (0.2 / 3600, "0.2 s"), (90 / 3600, "1.5 min"), (2.5, "2.50 h")])
def test_below_a_minute_seconds_then_minutes_then_hours(hours, text):
    assert duration(hours) == text
