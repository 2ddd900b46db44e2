"""benchmarks/serving/transform.py, small: both instance counts run, the outputs agree, RESULT lines."""

from __future__ import annotations

import pytest

from tests.benchmarks.test_smoke import run

pytestmark = pytest.mark.slow


def test_transform_small(tmp_path):
    found = run("benchmarks.serving.transform", "--replicate", "1", "--objects", "3", "--repeats", "1", work=tmp_path)
    assert {"transform_1_instance_records_per_s", "transform_2_instances_records_per_s",
            "transform_2_vs_1_instances", "transform_2_vs_1_instances_records_phase"} <= set(found)
    assert float(found["transform_2_vs_1_instances"]) > 0
