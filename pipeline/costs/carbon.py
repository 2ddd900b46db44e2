"""Energy and CO2e of instance time: power x hours x PUE x the grid's carbon intensity.

Every factor is a ``Factor`` with its value, unit and source, and every report prints them.
The factors are not ours where a maintained source exists: grid intensity, CPU TDP and the
CPU power curve are codecarbon's (``data/codecarbon_factors.json``, copied from its bundled
data by ``tools/extract_codecarbon_factors.py``); GPU board power, instance make-up and
AWS' PUE are published figures (``hardware.py``).

Power model (codecarbon's, without its live sampling):
- CPU: the instance's share of its CPU packages' TDP (vCPUs / threads per package) x a load
  fraction: codecarbon's average 0.5 of TDP when nothing was measured, else the measured
  CPU-time fraction (never below codecarbon's 10% floor);
- GPU: board power x GPUs x utilisation (assumed 1.0, full load: an upper bound, unless given);
- memory: 3 W per 8 GiB (codecarbon's heuristic before v3, from Crucial's figures).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from pipeline.costs import hardware
from pipeline.errors import UserError

FACTORS_FILE = Path(__file__).resolve().parent / "data" / "codecarbon_factors.json"
RAM_W_PER_GIB = 3.0 / 8.0
RAM_SOURCE = ("codecarbon <3 RAM heuristic, 3 W per 8 GB (https://www.crucial.com/support/"
              "articles-faq-memory/how-much-power-does-memory-use)")
GRID_COUNTRY_ENV = "TRAINPIPE_GRID_COUNTRY"  # where a local run's machine draws its power


@dataclass(frozen=True)
class Factor:
    name: str
    value: float
    unit: str
    source: str

    def line(self) -> str:
        return f"{self.name} = {self.value:.4g} {self.unit}  [{self.source}]"


@cache
def codecarbon() -> dict:
    return json.loads(FACTORS_FILE.read_text())


def _cc(part: str) -> str:
    return f"codecarbon {codecarbon()['codecarbon_version']} {codecarbon()[part]['file']}"


def grid_intensity(region: str | None = None, *, country: str | None = None,
                   override: float | None = None) -> Factor:
    """gCO2e/kWh of an AWS region's grid (its US state's where codecarbon has it, else its
    country's), or of ``country`` (ISO-3) for a machine of one's own."""
    if override is not None:
        return Factor("grid intensity", float(override), "gCO2e/kWh", "--grid-intensity given by the user")
    state = None
    if region is not None:
        if region not in hardware.REGIONS:
            raise UserError(f"no grid carbon intensity for region {region!r}: pass "
                            "--grid-intensity G_CO2E_PER_KWH")
        country, state = hardware.REGIONS[region]
    doc = codecarbon()
    if state and state in doc["us_state_intensity"]["values"]:
        return Factor(f"grid intensity ({region}: {state.title()})",
                      doc["us_state_intensity"]["values"][state], "gCO2e/kWh",
                      f"{_cc('us_state_intensity')} ({doc['us_state_intensity']['source']['name']})")
    if country and country.upper() in doc["country_intensity"]["values"]:
        entry = doc["country_intensity"]["values"][country.upper()]
        return Factor(f"grid intensity ({region + ': ' if region else ''}{entry['name']}, {entry['year']})",
                      entry["g_per_kwh"], "gCO2e/kWh", _cc("country_intensity"))
    if country:
        raise UserError(f"no grid carbon intensity for country {country!r}: pass "
                        "--grid-intensity G_CO2E_PER_KWH")
    world = doc["world_average"]
    return Factor("grid intensity (world average; set TRAINPIPE_GRID_COUNTRY=ISO3 for yours)",
                  world["g_per_kwh"], "gCO2e/kWh", f"{_cc('world_average')} ({world['source']})")


def pue(override: float | None = None, local: bool = False) -> Factor:
    if override is not None:
        return Factor("PUE", float(override), "", "--pue given by the user")
    if local:
        return Factor("PUE", 1.0, "", "this machine: none assumed (codecarbon's default, pue=1)")
    return Factor("PUE", hardware.AWS_PUE, "", hardware.AWS_PUE_SOURCE)


@dataclass(frozen=True)
class PowerModel:
    """Watts of one instance, as parts with their sources."""

    parts: tuple[Factor, ...]

    @property
    def watts(self) -> float:
        return sum(f.value for f in self.parts)


def cpu_watts_per_thread(cpu: str) -> Factor:
    tdp = codecarbon()["cpu_tdp"]["values"].get(cpu)
    threads = hardware.CPU_THREADS.get(cpu)
    if tdp and threads:
        return Factor(f"{cpu} TDP per thread ({tdp:g} W / {threads})", tdp / threads, "W",
                      f"{_cc('cpu_tdp')}; threads: {hardware.EC2_SOURCE}")
    per = codecarbon()["constants"]["default_power_per_thread_w"]
    return Factor(f"{cpu} (not in codecarbon's table): default per thread", per, "W",
                  f"{_cc('constants')} DEFAULT_POWER_PER_CORE")


def instance_power(instance_type: str, *, gpu_utilisation: float | None = None,
                   cpu_load: float | None = None) -> PowerModel:
    spec = hardware.instance(instance_type)
    if spec is None:
        raise UserError(f"no hardware figures for {instance_type} (vCPUs, GPUs): pass "
                        f"--power {instance_type}=WATTS")
    per_thread = cpu_watts_per_thread(spec.cpu)
    constants = codecarbon()["constants"]
    if cpu_load is None:
        load, load_source = constants["cpu_average_tdp_fraction"], f"{_cc('constants')} average fraction of TDP"
    else:
        load = max(cpu_load, constants["cpu_min_tdp_fraction"])
        load_source = "measured CPU time / (wall x cores), floor 10% of TDP (codecarbon)"
    parts = [Factor(f"CPU: {spec.vcpus} vCPU x {per_thread.value:.3g} W x load {load:.2f}",
                    spec.vcpus * per_thread.value * load, "W", f"{per_thread.source}; load: {load_source}")]
    if spec.gpus:
        board = hardware.GPUS[spec.gpu][0]
        util = 1.0 if gpu_utilisation is None else gpu_utilisation
        parts.append(Factor(f"GPU: {spec.gpus} x {spec.gpu} {board:g} W x utilisation {util:.2f}"
                            + (" (assumed)" if gpu_utilisation is None else ""),
                            spec.gpus * board * util, "W", hardware.NVIDIA_SOURCE))
    parts.append(Factor(f"memory: {spec.memory_gib:g} GiB x {RAM_W_PER_GIB:g} W/GiB",
                        spec.memory_gib * RAM_W_PER_GIB, "W", RAM_SOURCE))
    return PowerModel(tuple(parts))


@dataclass
class Energy:
    kwh: float
    co2e_kg: float
    method: str  # "measured" | "estimated"
    factors: list[Factor]

    def to_dict(self) -> dict:
        return {"kwh": self.kwh, "co2e_kg": self.co2e_kg, "method": self.method,
                "factors": [asdict(f) for f in self.factors]}


def energy_of(power_watts: float, instance_hours: float, pue_factor: Factor, intensity: Factor,
              method: str, parts: list[Factor]) -> Energy:
    kwh = power_watts * instance_hours / 1000.0 * pue_factor.value
    return Energy(kwh, kwh * intensity.value / 1000.0, method, [*parts, pue_factor, intensity])


def local_cpu() -> tuple[str, int]:
    """This machine's CPU model (as /proc/cpuinfo names it) and its cores."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return model, os.cpu_count() or 1


def local_energy(cpu_seconds: float, wall_seconds: float, *, country: str | None = None) -> Energy:
    """A local job's energy from the CPU time its processes used (getrusage of the children):
    estimated, since no RAPL counter is readable here (codecarbon's cpu_load mode: TDP share x
    load, floor 10%)."""
    model, cores = local_cpu()
    per_thread = cpu_watts_per_thread(model)
    floor = codecarbon()["constants"]["cpu_min_tdp_fraction"]
    busy = max(cpu_seconds, floor * cores * wall_seconds)
    watts = per_thread.value * busy / max(wall_seconds, 1e-9)
    parts = [Factor(f"CPU: {cpu_seconds:.1f} busy CPU-s (machine-wide) over {wall_seconds:.1f} s on {cores} cores x "
                    f"{per_thread.value:.3g} W/thread", watts, "W (average)", per_thread.source)]
    country = country or os.environ.get(GRID_COUNTRY_ENV) or None
    return energy_of(watts, wall_seconds / 3600.0, pue(local=True), grid_intensity(country=country),
                     "estimated (no RAPL/NVML counters readable on this machine)", parts)
