"""The advisor's plot: a local run (no price) still draws its time, else says why not."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from pipeline.costs.advisor import plot  # noqa: E402
from pipeline.costs.advisor.model import Layout  # noqa: E402
from pipeline.costs.advisor.recommend import Row  # noqa: E402


def _row(workers: int, cost=None, co2e=None) -> Row:
    return Row("local", Layout(1, workers), 0.001, 1000.0 * workers, 1.0, 1.0, 10 / 3600 / workers, cost, co2e)


def test_a_local_curve_plots_time_and_co2e_where_there_is_no_price(tmp_path, monkeypatch):
    drawn = {}
    real_savefig = __import__("matplotlib.figure", fromlist=["Figure"]).Figure.savefig

    def spy(fig, path, **kwargs):
        bottom = fig.axes[1]
        drawn["ylabel"] = bottom.get_ylabel()
        drawn["lines"] = [list(line.get_ydata()) for line in bottom.lines]
        drawn["twin"] = [ax.get_ylabel() for ax in fig.axes[2:]]
        return real_savefig(fig, path, **kwargs)

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", spy)
    out = plot.save(tmp_path / "p.png", {"local 1 host": [_row(1, co2e=1e-6), _row(2, co2e=6e-7)]}, [], "t")
    assert out.exists()
    assert drawn["ylabel"] == "time per run (s), predicted"
    assert drawn["lines"] == [pytest.approx([10.0, 5.0])]
    assert drawn["twin"] == ["g CO2e per run (dashed)"]


def test_nothing_to_plot_says_why_in_one_line():
    assert plot.nothing_to_plot({}) == "nothing to plot: no platform had a layout to predict"
    assert "no price, time or CO2e" in plot.nothing_to_plot({"x": [_row(1)]})
