"""benchmarks/serving/serve_load.py, small: zero 5xx, every well-formed request answered right."""

from __future__ import annotations

import pytest

from tests.benchmarks.test_smoke import run

pytestmark = pytest.mark.slow


def test_serve_load_small(tmp_path):
    found = run("benchmarks.serving.serve_load", "--requests", "400", "--clients", "4", "--latency-requests", "5",
                "--hostile-requests", "300", "--stalled", "2", work=tmp_path)
    assert float(found["serve_load_5xx"]) == 0
    assert float(found["serve_load_wrong_or_unanswered"]) == 0
    # Slow, oversized, malformed and stalled requests among the small ones: none a 5xx.
    assert float(found["serve_hostile_5xx"]) == 0
    assert float(found["serve_hostile_wrong_or_unanswered"]) == 0
    # Beside clients that never finish their headers (issue 48), /ping answered 200 throughout.
    assert float(found["serve_hostile_ping_not_200"]) == 0 and float(found["serve_hostile_stalled_headers_408"]) > 0
    assert {"serve_hostile_small_p99_ms", "serve_hostile_rss_peak_mib", "serve_hostile_waited_behind_a_slow_one"} <= set(found)
    assert {"serve_mlp_json_c8_p99_ms", "serve_cnn_png_c1_rps", "serve_load_rss_growth_mib"} <= set(found)
