"""Energy factors: where each comes from, and one line naming what to pass when one is missing."""

from __future__ import annotations

import pytest

from pipeline.costs import carbon
from pipeline.errors import UserError


def test_region_intensity_is_the_state_or_country_figure_of_codecarbon():
    oregon = carbon.grid_intensity("us-west-2")
    assert oregon.value == carbon.codecarbon()["us_state_intensity"]["values"]["oregon"]
    assert "eGRID" in oregon.source
    ireland = carbon.grid_intensity("eu-west-1")
    assert ireland.value == carbon.codecarbon()["country_intensity"]["values"]["IRL"]["g_per_kwh"]
    assert "global_energy_mix.json" in ireland.source


def test_a_missing_intensity_names_what_to_pass():
    with pytest.raises(UserError) as error:
        carbon.grid_intensity("xx-mars-1")
    assert str(error.value) == ("no grid carbon intensity for region 'xx-mars-1': pass "
                                "--grid-intensity G_CO2E_PER_KWH")
    assert carbon.grid_intensity("xx-mars-1", override=100.0).value == 100.0


def test_unknown_hardware_names_what_to_pass():
    with pytest.raises(UserError, match=r"pass --power ml.x9.huge=WATTS$"):
        carbon.instance_power("ml.x9.huge")


def test_local_energy_scales_with_cpu_time_and_says_it_is_estimated():
    low = carbon.local_energy(cpu_seconds=10, wall_seconds=100, country="FRA")
    high = carbon.local_energy(cpu_seconds=100, wall_seconds=100, country="FRA")
    assert high.kwh > low.kwh > 0
    assert high.method.startswith("estimated")
    assert any("France" in f.name for f in high.factors)
