"""The advisor's picture: predicted throughput and cost per run against workers, one line
per platform, the measured runs as points and the knee marked (PNG, matplotlib's Agg).

A local run has no price: its cost panel draws the predicted time per run (and CO2e, dashed,
on a second axis) as lines, and what each measured local job took (wall seconds, start-up
and model save included) and emitted as points. Both on one basis: a predicted run includes
the measured jobs' start-up and save (``advise.job_overhead``). With nothing to draw it says
why in one line.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.costs.advisor.observations import Observation
from pipeline.costs.advisor.recommend import Row

MEASURED_TIME = "measured job (start-up, save included)"
PREDICTED_TIME = "predicted run (start-up, save included)"
MEASURED_CO2E = "measured job CO2e"


def measured_points(name: str, measured: list[Observation]) -> list[Observation]:
    """The measured runs that belong on the curve ``name``: a local curve's layouts (one host,
    or several, with 1-rank runs on the one-host curve), a cloud curve's instance type."""
    if name.startswith("local"):
        one_host = name == "local 1 host"
        return [o for o in measured if o.local and (o.layout.hosts == 1) == one_host
                and (o.layout.workers > 1 or one_host)]
    return [o for o in measured if not o.local and o.instance_type == name]


def save(path: Path, curves: dict[str, list[Row]], measured: list[Observation], title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 7), sharex=True)
    priced = any(r.cost_usd is not None for rows in curves.values() for r in rows)
    energy = None  # the CO2e axis of an unpriced (local) plot, made when there is CO2e to draw
    for name, rows in curves.items():
        xs = [r.layout.workers for r in rows]
        line, = top.plot(xs, [r.throughput for r in rows], marker=".", label=f"{name} predicted")
        _knee(top, rows, line.get_color())
        costs = [(r.layout.workers, r.cost_usd) for r in rows if r.cost_usd is not None]
        if costs:
            bottom.plot(*zip(*costs, strict=True), marker=".", color=line.get_color(), label=name)
        elif not priced:
            # A local run has no price: its cost is its time (and, where the grid is known, CO2e).
            energy = _time_and_energy(bottom, energy, name, rows, measured_points(name, measured),
                                      line.get_color())
    first = True
    for name in curves:
        points = measured_points(name, measured)
        if points:
            top.scatter([o.layout.workers for o in points], [o.throughput for o in points],
                        marker="x", s=60, color="black", zorder=4, label="measured" if first else None)
            first = False
    top.set_ylabel("samples/s")
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(fontsize=8)
    bottom.set_ylabel("cost per run (USD)" if priced else "time per run (s): predicted line, measured x")
    if energy is not None:
        energy.set_ylabel("g CO2e per run (dashed, measured +)")
    bottom.set_xlabel("workers (Horovod ranks)")
    bottom.grid(alpha=0.3)
    if bottom.lines or bottom.collections:
        bottom.legend(fontsize=8)
    else:
        bottom.text(0.5, 0.5, nothing_to_plot(curves), ha="center", va="center", transform=bottom.transAxes)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _knee(axis, rows: list[Row], color) -> None:
    knees = [r for r in rows if r.knee]
    if knees:
        axis.scatter([knees[0].layout.workers], [knees[0].throughput], s=140, facecolors="none",
                     edgecolors=color, linewidths=2, zorder=3)
        axis.annotate("knee", (knees[0].layout.workers, knees[0].throughput),
                      textcoords="offset points", xytext=(6, -12))


def _time_and_energy(bottom, energy, name: str, rows: list[Row], points: list[Observation], color):
    """An unpriced curve's predicted time and CO2e per run, and its measured jobs' (points).
    Returns the CO2e axis (made on first use)."""
    if rows:
        bottom.plot([r.layout.workers for r in rows], [r.run_hours * 3600 for r in rows], marker=".",
                    color=color, label=f"{name}: {PREDICTED_TIME}")
    timed = [(o.layout.workers, o.job_seconds) for o in points if o.job_seconds is not None]
    if timed:
        bottom.scatter(*zip(*timed, strict=True), marker="x", s=60, color=color, zorder=4,
                       label=f"{name}: {MEASURED_TIME}")
    co2e = [(r.layout.workers, r.co2e_kg * 1000) for r in rows if r.co2e_kg is not None]
    emitted = [(o.layout.workers, o.co2e_kg * 1000) for o in points if o.co2e_kg is not None]
    if co2e or emitted:
        energy = energy or bottom.twinx()
    if co2e:
        energy.plot(*zip(*co2e, strict=True), linestyle="--", color=color, label=f"{name}: CO2e")
    if emitted:
        energy.scatter(*zip(*emitted, strict=True), marker="+", s=70, color=color, zorder=4,
                       label=f"{name}: {MEASURED_CO2E}")
    return energy


def nothing_to_plot(curves: dict[str, list[Row]]) -> str:
    """The one line the cost panel shows when it has no line or point to draw."""
    if not any(curves.values()):
        return "nothing to plot: no platform had a layout to predict"
    return "nothing to plot: no price, time or CO2e known for these platforms"
