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


def test_it_shows_the_published_machines_cores_behind_the_worst_row(capsys):
    # EfficientNet-B0 V100 AMP: 868 images/s over the 5 cores bind.sh gives a DGX-1 rank = 174
    # a core; its 8-GPU row 4880 / 8 / 5 = 122; the FP32 row 752 / 5 = 150 on the same cores.
    assert published_gpu.main([]) == 0
    out = capsys.readouterr().out
    assert "  efficientnet_b0  V100  amp     174    122   (AMP speedup 1.29x)" in out
    assert "  efficientnet_b0  V100  fp32    150    113   (AMP speedup 1.29x)" in out
    # Without that row the worst is B0 V100 FP32's -20.3%.
    assert "worst without EfficientNet-B0 V100 AMP (input-bound on its 5 cores: no FLOP model predicts it): 0.203" in out
