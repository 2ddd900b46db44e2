"""benchmarks/advisor/published_gpu.py prints every held-out row and its two RESULT lines."""

from __future__ import annotations

from benchmarks import harness as h
from benchmarks.advisor import published_gpu


def test_it_reports_each_held_out_row_and_the_worst_and_median(capsys):
    from pipeline.costs.advisor import gpus as G

    assert published_gpu.main([]) == 0
    out = capsys.readouterr().out
    checked = G.published_check()
    for row, predicted, error in checked:
        assert f"{row.images_per_s:7.0f} {predicted:9.0f} {error:+7.1%}" in out
    worst, median = G.check_summary(checked)
    assert f"{h.RESULT_PREFIX} advisor_published_single_gpu_worst_error {worst:.4g} target <=0.15" in out
    assert f"{h.RESULT_PREFIX} advisor_published_single_gpu_median_error {median:.4g} target -" in out
