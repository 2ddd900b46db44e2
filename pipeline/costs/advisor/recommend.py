"""Predictions for 1..N workers on each candidate platform, the knee, and the recommendation
for the user's goal: ``fastest`` under a budget, ``cheapest`` under a deadline, ``greenest``
(lowest CO2e, under a deadline if one is given)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.costs import carbon, startup
from pipeline.costs.accounting import Options
from pipeline.costs.advisor.fit import layouts
from pipeline.costs.advisor.knee import knee
from pipeline.costs.advisor.model import Layout, Platform, StepModel
from pipeline.costs.prices import PriceBook, missing_message
from pipeline.errors import UserError

GOALS = ("fastest", "cheapest", "greenest")


def duration(hours: float) -> str:
    """A run's length as a person reads it: seconds below a minute (a local run of the
    digits is ~10 s, which "0.00 min" hid), minutes below an hour, then hours."""
    seconds = hours * 3600
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{hours:.2f} h"


@dataclass
class Row:
    platform: str
    layout: Layout
    step_seconds: float
    throughput: float
    efficiency: float  # throughput / (workers x 1-worker throughput)
    epoch_seconds: float
    run_hours: float
    cost_usd: float | None
    co2e_kg: float | None
    knee: bool = False


@dataclass
class Workload:
    batch: int  # per worker
    samples_per_epoch: int
    epochs: int
    overhead_seconds: float = 0.0  # per job, start-up and model save (billed too)


def job_startup_seconds(platform: Platform) -> float:
    """A SageMaker training job's billed start-up on each host (pulling the training image:
    ``pipeline/costs/startup.py``); none locally, where nothing is pulled."""
    return 0.0 if platform.name == "local" else startup.seconds_for(platform.gpus_per_host)


def predict(model: StepModel, platform: Platform, workload: Workload, max_workers: int,
            per_host: int, book: PriceBook, region: str, options: Options,
            knee_fraction: float) -> tuple[list[Row], list[str]]:
    notes: list[str] = []
    rows = []
    start_up = job_startup_seconds(platform)
    if start_up:
        notes.append(f"{platform.name}: each run includes {start_up:.0f} s of start-up on every host "
                     "(pulling the training image; figures and sources: pipeline/costs/startup.py)")
    for layout in layouts(max_workers, per_host):
        step = model.step(workload.batch, layout, platform)
        throughput = layout.workers * workload.batch / step
        epoch = workload.samples_per_epoch / throughput
        seconds = epoch * workload.epochs + workload.overhead_seconds + start_up
        cost = co2e = None
        if platform.name == "local":
            busy = min(layout.workers * max(model.parallelism, 1.0), platform.cores_per_host)
            co2e = carbon.local_energy(busy * seconds, seconds).co2e_kg
        else:
            price = book.find(platform.name, region)
            if price is None:
                notes.append(missing_message(platform.name, region))
            else:
                cost = layout.hosts * seconds / 3600 * price.usd_per_hour
            try:
                power = (options.power.get(platform.name)
                         or carbon.instance_power(platform.name, gpu_utilisation=options.gpu_utilisation).watts)
                energy = carbon.energy_of(power * layout.hosts, seconds / 3600, carbon.pue(options.pue),
                                          carbon.grid_intensity(region, override=options.grid_intensity),
                                          "estimated", [])
                co2e = energy.co2e_kg
            except UserError as error:
                notes.append(str(error))
        rows.append(Row(platform.name, layout, step, throughput, 0.0, epoch, seconds / 3600, cost, co2e))
    base = rows[0].throughput
    for row in rows:
        row.efficiency = row.throughput / (row.layout.workers * base)
    at = knee([r.layout.workers for r in rows], [r.throughput for r in rows], knee_fraction)
    for row in rows:
        row.knee = row.layout.workers == at
    return rows, list(dict.fromkeys(notes))


def choose(rows: list[Row], goal: str, budget: float | None, deadline_hours: float | None) -> tuple[Row | None, str]:
    if goal not in GOALS:
        raise UserError(f"--goal {goal!r}: choose one of {', '.join(GOALS)}")
    candidates = rows
    why = []
    if budget is not None:
        candidates = [r for r in candidates if r.cost_usd is not None and r.cost_usd <= budget]
        why.append(f"cost <= ${budget:g}")
    if deadline_hours is not None:
        candidates = [r for r in candidates if r.run_hours <= deadline_hours]
        why.append(f"time <= {deadline_hours:g} h")
    if goal == "fastest":
        pick = max(candidates, key=lambda r: (r.throughput, -(r.cost_usd or 0)), default=None)
    elif goal == "cheapest":
        priced = [r for r in candidates if r.cost_usd is not None]
        pick = min(priced, key=lambda r: (r.cost_usd, r.run_hours), default=None)
    else:
        known = [r for r in candidates if r.co2e_kg is not None]
        pick = min(known, key=lambda r: (r.co2e_kg, r.run_hours), default=None)
    return pick, " and ".join(why) or "no constraint"


def table(rows: list[Row]) -> list[str]:
    out = [f"  {'platform':18s} {'layout':>6s} {'workers':>7s} {'step ms':>8s} {'samples/s':>10s} "
           f"{'effic.':>6s} {'epoch s':>8s} {'run h':>8s} {'cost $':>9s} {'CO2e kg':>9s}"]
    for r in rows:
        out.append(f"  {r.platform:18s} {str(r.layout):>6s} {r.layout.workers:7d} {r.step_seconds * 1e3:8.3f} "
                   f"{r.throughput:10.1f} {r.efficiency:6.0%} {r.epoch_seconds:8.2f} {r.run_hours:8.4f} "
                   + (f"{r.cost_usd:9.4g} " if r.cost_usd is not None else f"{'n/a':>9s} ")
                   + (f"{r.co2e_kg:9.3g}" if r.co2e_kg is not None else f"{'n/a':>9s}")
                   + ("  <- knee" if r.knee else ""))
    return out
