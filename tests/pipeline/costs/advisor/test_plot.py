"""The advisor's plot: a local run (no price) still draws its time and CO2e, predicted and
measured, else says why not."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from pipeline.costs.advisor import plot  # noqa: E402
from pipeline.costs.advisor.model import Layout  # noqa: E402
from pipeline.costs.advisor.observations import Observation  # noqa: E402
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
    assert drawn["ylabel"] == "time per run (s): predicted line, measured x"
    assert drawn["lines"] == [pytest.approx([10.0, 5.0])]
    assert drawn["twin"] == ["g CO2e per run (dashed, measured +)"]


def test_nothing_to_plot_says_why_in_one_line():
    assert plot.nothing_to_plot({}) == "nothing to plot: no platform had a layout to predict"
    assert "no price, time or CO2e" in plot.nothing_to_plot({"x": [_row(1)]})


def _observed(hosts: int, ppn: int, seconds=None, co2e=None) -> Observation:
    return Observation("run", Layout(hosts, ppn), 32, 0.001, 0.001, 100, False, "local", True, 2, 2,
                       job_seconds=seconds, co2e_kg=co2e)


def _bottom_panel(monkeypatch) -> dict:
    drawn: dict = {}
    real_savefig = __import__("matplotlib.figure", fromlist=["Figure"]).Figure.savefig

    def spy(fig, path, **kwargs):
        bottom = fig.axes[1]
        drawn["points"] = [[tuple(xy) for xy in c.get_offsets()] for c in bottom.collections]
        drawn["twin_points"] = [[tuple(xy) for xy in c.get_offsets()] for ax in fig.axes[2:] for c in ax.collections]
        drawn["texts"] = [t.get_text() for t in bottom.texts]
        return real_savefig(fig, path, **kwargs)

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", spy)
    return drawn


def test_a_local_plot_shows_what_each_measured_job_took_and_emitted(tmp_path, monkeypatch):
    drawn = _bottom_panel(monkeypatch)
    measured = [_observed(1, 1, 8.0, 1e-5), _observed(1, 2, 9.0, 2e-5), _observed(2, 1, 11.0, None),
                _observed(1, 2)]  # a record without a cost: no point
    plot.save(tmp_path / "p.png", {"local 1 host": [_row(1, co2e=1e-6), _row(2, co2e=6e-7)],
                                   "local 2 hosts": [_row(2)]}, measured, "t")
    assert drawn["points"] == [[(1.0, 8.0), (2.0, 9.0)], [(2.0, 11.0)]]  # per curve, its own layouts
    assert drawn["twin_points"] == [[(1.0, pytest.approx(0.01)), (2.0, pytest.approx(0.02))]]  # grams
    assert drawn["texts"] == []


def test_an_empty_cost_panel_says_why_in_one_line(tmp_path, monkeypatch):
    drawn = _bottom_panel(monkeypatch)
    plot.save(tmp_path / "p.png", {"local 1 host": []}, [], "t")
    assert drawn["texts"] == ["nothing to plot: no platform had a layout to predict"]
