"""benchmarks/input/resized_records.py on a few photos: every candidate measured, its RESULT lines."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_every_candidate_is_measured_and_the_ratio_reported():
    done = subprocess.run([sys.executable, "-m", "benchmarks.input.resized_records", "--photos", "4",
                           "--seconds", "0.05", "--repeats", "1",
                           "--accuracy-photos", "6", "--accuracy-epochs", "1", "--accuracy-size", "32"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    for name in ("original", "jpeg90_224", "jpeg95_252", "jpeg90_252_fastidct", "processing_resized", "raw_252"):
        assert re.search(rf"^  {name} +\d+ images/s per core  x[\d.]+ +[\d.]+ KB per record$", done.stdout, re.M), name
    assert re.search(r"^RESULT input_resized_vs_original_per_core [\d.]+ target >=2.5$", done.stdout, re.M)
    assert re.search(r"^RESULT input_raw_vs_original_per_core [\d.]+ target -$", done.stdout, re.M)
    for name in ("input_resized_accuracy", "input_original_accuracy", "input_resized_served_originals_accuracy"):
        assert re.search(rf"^RESULT {name} [\d.]+ target -$", done.stdout, re.M), name
