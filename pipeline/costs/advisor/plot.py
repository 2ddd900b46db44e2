"""The advisor's picture: predicted throughput and cost per run against workers, one line
per platform, the measured runs as points and the knee marked (PNG, matplotlib's Agg)."""

from __future__ import annotations

from pathlib import Path

from pipeline.costs.advisor.observations import Observation
from pipeline.costs.advisor.recommend import Row


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
        knees = [r for r in rows if r.knee]
        if knees:
            top.scatter([knees[0].layout.workers], [knees[0].throughput], s=140, facecolors="none",
                        edgecolors=line.get_color(), linewidths=2, zorder=3)
            top.annotate("knee", (knees[0].layout.workers, knees[0].throughput),
                         textcoords="offset points", xytext=(6, -12))
        costs = [(r.layout.workers, r.cost_usd) for r in rows if r.cost_usd is not None]
        if costs:
            bottom.plot(*zip(*costs, strict=True), marker=".", color=line.get_color(), label=name)
        elif not priced:
            # A local run has no price: its cost is its time (and, where the grid is known, CO2e).
            bottom.plot(xs, [r.run_hours * 3600 for r in rows], marker=".", color=line.get_color(),
                        label=f"{name}: time")
            co2e = [(r.layout.workers, r.co2e_kg * 1000) for r in rows if r.co2e_kg is not None]
            if co2e:
                energy = energy or bottom.twinx()
                energy.plot(*zip(*co2e, strict=True), linestyle="--", color=line.get_color(),
                            label=f"{name}: CO2e")
    for name in curves:
        if name.startswith("local"):
            one_host = name == "local 1 host"
            points = [o for o in measured if o.local and (o.layout.hosts == 1) == one_host
                      and (o.layout.workers > 1 or one_host)]
        else:
            points = [o for o in measured if not o.local and o.instance_type == name]
        if points:
            top.scatter([o.layout.workers for o in points], [o.throughput for o in points],
                        marker="x", s=60, color="black", zorder=4,
                        label="measured" if name == next(iter(curves)) else None)
    top.set_ylabel("samples/s")
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(fontsize=8)
    bottom.set_ylabel("cost per run (USD)" if priced else "time per run (s), predicted")
    if energy is not None:
        energy.set_ylabel("g CO2e per run (dashed)")
    bottom.set_xlabel("workers (Horovod ranks)")
    bottom.grid(alpha=0.3)
    if bottom.lines:
        bottom.legend(fontsize=8)
    else:
        bottom.text(0.5, 0.5, nothing_to_plot(curves), ha="center", va="center", transform=bottom.transAxes)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def nothing_to_plot(curves: dict[str, list[Row]]) -> str:
    """The one line the cost panel shows when it has no line to draw."""
    if not any(curves.values()):
        return "nothing to plot: no platform had a layout to predict"
    return "nothing to plot: no price, time or CO2e known for these platforms"
