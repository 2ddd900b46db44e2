"""benchmarks/input/tables.py runs on tiny sizes and prints its RESULT lines (no timing asserted)."""

from __future__ import annotations

import pytest

from tests.benchmarks.test_smoke import run

pytestmark = pytest.mark.slow


def test_tables_processing_and_the_input_rates(tmp_path):
    found = run("benchmarks.input.tables", "--rows", "3000", "--input-rows", "3000", "--repeats", "1", work=tmp_path)
    assert {"tables_processing_records_per_s", "tables_processing_step_peak_mb",
            "tables_input_rate_mixed_over_numeric", "tables_input_rate_streamed_mixed_over_numeric",
            "tables_input_rate_mixed_streamed_over_numeric_held", "tables_input_cpu_rate_mixed_over_numeric"} <= set(found)
    # The step's growth over its start can be 0 MB at 3000 rows (seen on CI's clean machine; the
    # benchmark floors the kernel's counter skew at 0): every other value is a rate or a ratio of
    # rates, which a run that did its work cannot make 0.
    assert float(found.pop("tables_processing_step_peak_mb")) >= 0
    assert all(float(value) > 0 for value in found.values())


def test_tables_input_only_skips_the_processing_benchmark(tmp_path):
    found = run("benchmarks.input.tables", "--input-rows", "3000", "--repeats", "1", "--input-only", work=tmp_path)
    assert "tables_processing_records_per_s" not in found
    assert "tables_input_rate_mixed_over_numeric" in found
