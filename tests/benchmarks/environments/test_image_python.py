"""benchmarks/environments/image_python.py runs on one repetition and prints its RESULT lines
(no timing asserted: figures are for BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from pipeline.local.jobs.environments.interpreters import find_python
from tests.benchmarks.test_smoke import run


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_image_python_benchmark_prints_its_ratios(tmp_path):
    found = run("benchmarks.environments.image_python", "--repeats", "1", work=tmp_path)
    assert {"image_python_first_vs_runner", "image_python_later_vs_runner"} <= set(found)
