"""What each job of an execution cost and emitted, and the execution's totals.

Cloud jobs are charged from what SageMaker bills: ``DescribeTrainingJob``'s
``BillableTimeInSeconds`` x ``InstanceCount`` (managed spot already shortened it; the saving
is 1 - billable / training time), ``DescribeProcessingJob``'s start-to-end time x count.
Local jobs ran on this machine: their energy is this machine's (measured with RAPL where
readable, else estimated from the CPU time the job's processes used), and their cost is
what the same instance-time would have cost on SageMaker at the requested instance type:
the figure a budget is made of.

A job's document (``execution.json``, ``status``)::

    {"job", "kind", "instance_type", "instance_count", "seconds", "instance_hours",
     "price": {"usd_per_hour", "source"} | null, "cost_usd" | null, "spot_savings" | null,
     "energy": {"kwh", "co2e_kg", "method", "factors": [...]}, "notes": [...]}
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pipeline.costs import carbon
from pipeline.costs.prices import PriceBook, missing_message
from pipeline.errors import UserError

RAPL = Path("/sys/class/powercap/intel-rapl:0/energy_uj")
# Job statuses (SageMaker's words) of a job that ended without completing: it keeps its row,
# charged for the time it held its instances (SageMaker bills a stopped job up to the stop).
ENDED_EARLY = ("Stopped", "Failed")


@dataclass
class Options:
    """What the user may pass instead of a factor we lack (one flag per factor)."""

    grid_intensity: float | None = None
    pue: float | None = None
    gpu_utilisation: float | None = None
    power: dict[str, float] = field(default_factory=dict)  # instance type -> W


def _seconds(start, end) -> float | None:
    if start is None or end is None:
        return None
    if isinstance(start, str):
        start, end = datetime.fromisoformat(start), datetime.fromisoformat(end)
    return max((end - start).total_seconds(), 0.0)


def _groups(description: dict, kind: str) -> list[tuple[str, int]]:
    if kind == "Processing":
        cluster = (description.get("ProcessingResources") or {}).get("ClusterConfig") or {}
        return [(cluster.get("InstanceType", "?"), int(cluster.get("InstanceCount", 1)))]
    resources = description.get("ResourceConfig") or {}
    if resources.get("InstanceGroups"):
        return [(g["InstanceType"], int(g["InstanceCount"])) for g in resources["InstanceGroups"]]
    return [(resources.get("InstanceType", "?"), int(resources.get("InstanceCount", 1)))]


def job_seconds(description: dict, kind: str) -> tuple[float | None, float | None]:
    """(billed seconds per instance, seconds the instances ran) of a Describe*Job answer."""
    if kind == "Training":
        billable = description.get("BillableTimeInSeconds")
        ran = description.get("TrainingTimeInSeconds")
        if ran is None:
            ran = _seconds(description.get("TrainingStartTime"), description.get("TrainingEndTime"))
        return (float(billable) if billable is not None else ran), (float(ran) if ran is not None else None)
    ran = _seconds(description.get("ProcessingStartTime"), description.get("ProcessingEndTime"))
    return ran, ran


def _power(instance_type: str, options: Options, cpu_load: float | None = None) -> carbon.PowerModel:
    if instance_type in options.power:
        return carbon.PowerModel((carbon.Factor(f"{instance_type} power", options.power[instance_type],
                                                "W", "--power given by the user"),))
    return carbon.instance_power(instance_type, gpu_utilisation=options.gpu_utilisation, cpu_load=cpu_load)


def cloud_job_cost(description: dict, kind: str, region: str, book: PriceBook,
                   options: Options | None = None) -> dict:
    """One SageMaker job's cost and energy from its Describe*Job answer. A factor we lack is a
    note naming what to pass, not an error: the rest of the report still stands."""
    options = options or Options()
    billed, ran = job_seconds(description, kind)
    name = description.get("TrainingJobName") or description.get("ProcessingJobName") or "?"
    doc: dict = {"job": name, "kind": kind, "notes": []}
    groups = _groups(description, kind)
    doc["instance_type"] = ", ".join(t for t, _ in groups)
    doc["instance_count"] = sum(c for _, c in groups)
    doc["seconds"] = billed
    status = description.get("TrainingJobStatus") or description.get("ProcessingJobStatus")
    if status in ENDED_EARLY:
        doc["status"] = status
    if billed is None and status in ENDED_EARLY:
        # Ended before its instances started: nothing was billed, so it adds nothing to the
        # totals (an unknown figure would blank the whole execution's sums).
        doc.update(seconds=0.0, instance_hours=0.0, cost_usd=0.0,
                   energy={"kwh": 0.0, "co2e_kg": 0.0, "factors": []})
        doc["notes"].append(f"{name}: {status.lower()} before any billable time (nothing charged)")
        return doc
    if billed is None:
        doc["notes"].append("the job has not run yet (no billable time)")
        return doc
    doc["instance_hours"] = sum(c for _, c in groups) * billed / 3600.0
    if kind == "Training" and ran and description.get("EnableManagedSpotTraining"):
        doc["spot_savings"] = max(0.0, 1.0 - billed / ran)
    cost = 0.0
    for instance_type, count in groups:
        price = book.find(instance_type, region, kind)
        if price is None:
            doc["notes"].append(missing_message(instance_type, region))
            cost = None
            break
        doc["price"] = {"usd_per_hour": price.usd_per_hour, "source": price.source}
        cost += count * billed / 3600.0 * price.usd_per_hour
    doc["cost_usd"] = cost
    try:
        intensity = carbon.grid_intensity(region, override=options.grid_intensity)
        energy = None
        for instance_type, count in groups:
            power = _power(instance_type, options)
            part = carbon.energy_of(power.watts * count, billed / 3600.0, carbon.pue(options.pue),
                                    intensity, "estimated (published power figures)", list(power.parts))
            energy = part if energy is None else carbon.Energy(
                energy.kwh + part.kwh, energy.co2e_kg + part.co2e_kg, part.method,
                energy.factors + part.factors)
        doc["energy"] = energy.to_dict() if energy else None
    except UserError as error:
        doc["notes"].append(str(error))
    return doc


class LocalMeter:
    """Around one local job: wall time, the machine's busy CPU time (``/proc/stat``: every
    process, as RAPL and codecarbon's default ``tracking_mode="machine"`` see it; the job's
    ranks run under Open MPI daemons that leave the runner's process tree, so the runner's
    own children's rusage misses them), and the RAPL package counter where readable.

    A job pinned to some of the cores (a step running beside others, dag/scheduler.py) is
    metered on its cores only, and its share of the RAPL energy is its share of the busy time:
    side-by-side steps would otherwise each count the whole machine."""

    def __init__(self):
        self.cpus = _own_cpus()
        self.wall0 = time.perf_counter()
        self.cpu0 = self._busy_cpu(self.cpus)
        self.all0 = self._busy_cpu(None) if self.cpus is not None else self.cpu0
        self.rapl0 = self._rapl()

    @staticmethod
    def _busy_cpu(cpus: frozenset[int] | None = None) -> float:
        try:
            return busy_ticks(Path("/proc/stat").read_text(), cpus) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            import resource

            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime

    @staticmethod
    def _rapl() -> int | None:
        try:
            return int(RAPL.read_text())
        except (OSError, ValueError):
            return None

    def stop(self) -> tuple[float, float, float | None]:
        """(wall seconds, CPU seconds, RAPL joules or None)."""
        wall = time.perf_counter() - self.wall0
        cpu = self._busy_cpu(self.cpus) - self.cpu0
        rapl1 = self._rapl()
        joules = (rapl1 - self.rapl0) / 1e6 if rapl1 is not None and self.rapl0 is not None and rapl1 >= self.rapl0 else None
        if joules is not None and self.cpus is not None:
            everything = self._busy_cpu(None) - self.all0
            joules *= min(1.0, cpu / everything) if everything > 0 else 0.0
        return wall, cpu, joules


def _own_cpus() -> frozenset[int] | None:
    """The cores this thread may run on, when they are fewer than the machine's; else None."""
    try:
        own = frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return own if len(own) < (os.cpu_count() or len(own)) else None


def busy_ticks(stat: str, cpus: frozenset[int] | None = None) -> float:
    """Busy clock ticks in ``/proc/stat``'s text: the machine's (its ``cpu`` line), or the sum of
    the ``cpuN`` lines of ``cpus``."""
    total = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu"):
            continue
        if (cpus is None and name != "cpu") or (cpus is not None and (name == "cpu" or int(name[3:]) not in cpus)):
            continue
        ticks = [int(v) for v in fields]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        total += sum(ticks[:8]) - idle
    return total


def local_job_cost(description: dict, kind: str, region: str, book: PriceBook,
                   wall: float, cpu_seconds: float, rapl_joules: float | None = None) -> dict:
    """A local job: this machine's energy; the SageMaker price of the same instance-time."""
    name = description.get("TrainingJobName") or description.get("ProcessingJobName") or "?"
    groups = _groups(description, kind)
    count = sum(c for _, c in groups)
    model, cores = carbon.local_cpu()
    doc: dict = {"job": name, "kind": kind, "instance_type": ", ".join(t for t, _ in groups),
                 "instance_count": count, "seconds": wall, "instance_hours": count * wall / 3600.0,
                 "cpu_seconds": cpu_seconds, "machine": {"cpu": model, "cores": cores}, "notes": []}
    if rapl_joules is not None:
        intensity = carbon.grid_intensity(country=None)
        kwh = rapl_joules / 3.6e6
        energy = carbon.Energy(kwh, kwh * intensity.value / 1000.0, "measured (RAPL package counter)",
                               [carbon.Factor("RAPL energy", rapl_joules, "J", str(RAPL)), intensity])
    else:
        energy = carbon.local_energy(cpu_seconds, wall)
    doc["energy"] = energy.to_dict()
    cost = 0.0
    for instance_type, n in groups:
        price = book.find(instance_type, region, kind)
        if price is None:
            doc["notes"].append(missing_message(instance_type, region) + " (for the SageMaker-equivalent cost)")
            cost = None
            break
        doc["price"] = {"usd_per_hour": price.usd_per_hour, "source": price.source}
        cost += n * wall / 3600.0 * price.usd_per_hour
    doc["cost_usd"] = cost
    doc["cost_basis"] = "SageMaker-equivalent: this run's job time at the requested instance type"
    return doc


def stopped_local_job(doc: dict, reason: str | None) -> dict:
    """A local job's cost document (``local_job_cost``) when the run was stopped during it:
    its instance-time until the stop still counts, and the row says it stopped."""
    doc = {**doc, "status": "Stopped", "notes": list(doc.get("notes", []))}
    doc["notes"].append(f"{doc.get('job') or '?'}: ran {doc.get('seconds') or 0.0:.1f} s until "
                        f"{reason or 'stopped'}; charged up to the stop")
    return doc


def totals(jobs: list[dict]) -> dict:
    """The execution's sums; a sum over a job with a missing figure is None (never partial)."""
    def total(get):
        values = [get(j) for j in jobs]
        return None if any(v is None for v in values) else sum(values)

    return {
        "instance_hours": total(lambda j: j.get("instance_hours", 0.0)),
        "cost_usd": total(lambda j: j.get("cost_usd")),
        "energy_kwh": total(lambda j: (j.get("energy") or {}).get("kwh")),
        "co2e_kg": total(lambda j: (j.get("energy") or {}).get("co2e_kg")),
        "jobs": len(jobs),
    }


def _money(value) -> str:
    return "n/a" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _num(value, fmt: str, unit: str) -> str:
    return "n/a" if value is None else f"{value:{fmt}} {unit}"


def report_line(jobs: list[dict]) -> list[str]:
    """A failed run's cost, on one line: its totals (the block of ``report_lines``, a row per
    job and every factor, would bury the failure above it). execution.json keeps every figure."""
    if not jobs:
        return []
    total = totals(jobs)
    return ["", f"cost and carbon so far: {_money(total['cost_usd'])} (SageMaker-equivalent), "
                f"{_num(total['instance_hours'], '.4f', 'h')}, {_num(total['energy_kwh'], '.4g', 'kWh')}, "
                f"{_num(total['co2e_kg'], '.4g', 'kg CO2e')} over {total['jobs']} job(s)"]


def report_lines(jobs: list[dict], *, local: bool) -> list[str]:
    """The cost block of the run summary / ``status``: a row per job, the totals, then every
    factor and price with its source (each once)."""
    if not jobs:
        return []
    rows = [("JOB", "INSTANCES", "HOURS", "COST", "ENERGY", "CO2E")]
    for job in jobs:
        energy = job.get("energy") or {}
        spot = f" (spot -{job['spot_savings']:.0%})" if job.get("spot_savings") else ""
        ended = f" ({job['status'].lower()})" if job.get("status") in ENDED_EARLY else ""
        rows.append(((job.get("step") or job["job"]) + ended,
                     f"{job.get('instance_count', '?')} x {job.get('instance_type', '?')}",
                     _num(job.get("instance_hours"), ".4f", "h"), _money(job.get("cost_usd")) + spot,
                     _num(energy.get("kwh"), ".4g", "kWh"), _num(energy.get("co2e_kg"), ".4g", "kg")))
    total = totals(jobs)
    rows.append(("TOTAL", "", _num(total["instance_hours"], ".4f", "h"), _money(total["cost_usd"]),
                 _num(total["energy_kwh"], ".4g", "kWh"), _num(total["co2e_kg"], ".4g", "kg")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    title = ("cost and carbon (cost: SageMaker-equivalent of this run's job time; energy: this machine)"
             if local else "cost and carbon (billed time x price; energy from published power figures)")
    lines = ["", title] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    seen: list[str] = []
    for job in jobs:
        price = job.get("price")
        if price:
            seen.append(f"price {job.get('instance_type')}: ${price['usd_per_hour']:g}/h [{price['source']}]")
        energy = job.get("energy") or {}
        if energy.get("method"):
            seen.append(f"energy method: {energy['method']}")
        for factor in energy.get("factors", []):
            # The job's own power parts are named for the job; shared factors (PUE, grid) once.
            own = factor["name"].startswith(("CPU", "GPU", "memory", "RAPL"))
            label = f"{job.get('step') or job['job']}: " if own else ""
            seen.append(f"{label}{factor['name']} = {factor['value']:.4g} {factor['unit']}  "
                        f"[{factor['source']}]".replace("  ]", "]").replace(" ]", "]"))
        seen += job.get("notes", [])
    lines += ["  " + line for line in dict.fromkeys(seen)]
    return lines
