"""Regenerate ``pipeline/costs/data/codecarbon_factors.json`` from a codecarbon wheel.

trainpipe does not depend on codecarbon (it would add nine packages to the training
environment for three tables); it ships the factors it needs, copied from codecarbon's own
bundled data files, with the file and the codecarbon version each came from:

    pip download --no-deps codecarbon==3.3.2 -d /tmp/cc && unzip -q /tmp/cc/*.whl -d /tmp/cc/x
    python tools/extract_codecarbon_factors.py /tmp/cc/x

- grid carbon intensity (gCO2e/kWh) of every country an AWS region is in:
  ``data/private_infra/global_energy_mix.json`` (``carbon_intensity``);
- of the US states that host AWS regions: ``data/private_infra/2023/usa_emissions.json``
  (EPA eGRID, lbs/MWh, converted to g/kWh);
- CPU thermal design power (W) of the CPUs in SageMaker instance families:
  ``data/hardware/cpu_power.csv``;
- the world average codecarbon falls back to (``carbon_intensity_per_source.json``);
- codecarbon's constants for unknown CPUs and its CPU-load power curve (``core/cpu.py``,
  ``external/hardware.py``).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "pipeline" / "costs" / "data" / "codecarbon_factors.json"
# Countries and US states of the AWS regions in pipeline/costs/hardware.py.
COUNTRIES = ("USA", "CAN", "BRA", "IRL", "GBR", "DEU", "FRA", "SWE", "ITA", "ESP", "CHE",
             "JPN", "KOR", "SGP", "AUS", "IND", "IDN", "ZAF", "ARE", "BHR", "ISR", "HKG")
STATES = ("virginia", "ohio", "oregon", "california")
CPUS = ("Intel Xeon Platinum 8124M", "Intel Xeon Platinum 8175M", "Intel Xeon Platinum 8259CL",
        "Intel Xeon Platinum 8275CL", "Intel Xeon Platinum 8375C", "Intel Xeon Platinum 8488C",
        "Intel Xeon E5-2686 v4", "AMD EPYC 7R13", "AMD EPYC 7R32")
LBS_PER_MWH_TO_G_PER_KWH = 453.59237 / 1000.0


def main(root: str) -> int:
    base = Path(root) / "codecarbon"
    version = re.search(r'"([^"]+)"', (base / "_version.py").read_text()).group(1)
    mix = json.loads((base / "data/private_infra/global_energy_mix.json").read_text())
    usa = json.loads((base / "data/private_infra/2023/usa_emissions.json").read_text())
    with open(base / "data/hardware/cpu_power.csv", encoding="utf-8-sig") as f:
        tdp = {row["Name"]: float(row["TDP"]) for row in csv.DictReader(f) if row["Name"] in CPUS}
    per_source = json.loads((base / "data/private_infra/carbon_intensity_per_source.json").read_text())
    cpu_py = (base / "core/cpu.py").read_text()
    hw_py = (base / "external/hardware.py").read_text()
    doc = {
        "codecarbon_version": version,
        "country_intensity": {
            "file": "codecarbon/data/private_infra/global_energy_mix.json (carbon_intensity)",
            "unit": "gCO2e/kWh",
            "values": {c: {"g_per_kwh": mix[c]["carbon_intensity"], "year": mix[c]["year"],
                           "name": mix[c]["country_name"]} for c in COUNTRIES if c in mix},
        },
        "world_average": {
            "file": "codecarbon/data/private_infra/carbon_intensity_per_source.json (world_average)",
            "source": per_source["world_average_source"],
            "g_per_kwh": float(per_source["world_average"]),
        },
        "us_state_intensity": {
            "file": "codecarbon/data/private_infra/2023/usa_emissions.json",
            "source": usa["_source"],
            "unit": "gCO2e/kWh (from lbs/MWh)",
            "values": {s: round(usa[s]["emissions"] * LBS_PER_MWH_TO_G_PER_KWH, 3) for s in STATES},
        },
        "cpu_tdp": {
            "file": "codecarbon/data/hardware/cpu_power.csv",
            "unit": "W per CPU package",
            "values": {name: tdp[name] for name in CPUS if name in tdp},
        },
        "constants": {
            "file": "codecarbon/core/cpu.py, codecarbon/external/hardware.py",
            "default_power_per_thread_w": float(re.search(r"DEFAULT_POWER_PER_CORE = (\d+)", cpu_py).group(1)),
            "cpu_average_tdp_fraction": float(re.search(r"CONSUMPTION_PERCENTAGE_CONSTANT = ([\d.]+)", hw_py).group(1)),
            "cpu_min_tdp_fraction": 0.1,
        },
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT} from codecarbon {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
