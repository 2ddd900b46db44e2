"""GPU ceilings (pipeline/costs/advisor/gpus.py) on hand-computed cases, and the check of the
compute ceiling against NVIDIA's published TensorFlow rows it was not calibrated on."""

from __future__ import annotations

import pytest

from pipeline.costs.advisor import gpus as G


def test_the_resnet50_rows_calibrate_the_utilisation_and_reproduce_themselves():
    calibration = G.calibrate([r for r in G.PUBLISHED if G.is_calibration(r)])
    # A100 AMP: 2375 images/s x 23.20 GFLOP / 312 TFLOP/s = 0.1766 of the peak.
    assert calibration.utilisation[("ampere", G.AMP)] == pytest.approx(2375 * 23.20e9 / 312e12)
    # V100 FP32 (no TF32 on Volta): 412 x 23.20e9 / 15.7e12 = 0.6088.
    assert calibration.utilisation[("volta", G.FP32)] == pytest.approx(0.6088, abs=1e-4)
    # EfficientNet-B0's efficiency, on its A100 AMP row: 3454 x 2.367e9 / 312e12 / 0.1766 = 0.1484.
    assert calibration.efficiency["efficientnet_b0"] == pytest.approx(0.1484, abs=1e-4)
    for row in G.PUBLISHED:
        if G.is_calibration(row):
            assert calibration.images_per_s(row.flops, row.gpu, row.precision, row.model) == \
                pytest.approx(row.images_per_s)


def test_held_out_published_rows_are_predicted_and_the_errors_reported():
    checked = G.published_check()
    held = {(r.model, r.gpu, r.precision) for r, _, _ in checked}
    # Six rows never seen by the calibration: B0 and B4 on V100 (both precisions) and A100 TF32.
    assert held == {(m, g, p) for m in ("efficientnet_b0", "efficientnet_b4")
                    for g, p in (("V100", G.FP32), ("V100", G.AMP), ("A100", G.FP32))}
    by = {(r.model, r.gpu, r.precision): (predicted, error) for r, predicted, error in checked}
    # By hand: B4 on A100 TF32 = 0.13518 x (470 x 26.76e9 / 312e12 / 0.1766) x 156e12 / 26.76e9.
    u_tf32 = 909 * 23.20e9 / 156e12
    e_b4 = 470 * 26.76e9 / 312e12 / (2375 * 23.20e9 / 312e12)
    assert by[("efficientnet_b4", "A100", G.FP32)][0] == pytest.approx(u_tf32 * e_b4 * 156e12 / 26.76e9)
    worst, median = G.check_summary(checked)
    assert worst == max(abs(e) for _, e in by.values()) and 0 <= median <= worst


def test_compute_ceiling_scales_with_pixels_and_names_its_source():
    at_224, source = G.compute_ceiling("resnet50", 224, "A100", G.AMP)
    assert at_224 == pytest.approx(2375)  # the calibration row itself
    assert "DeepLearningExamples" in source and "23.2 GFLOP/image" in source
    at_112, _ = G.compute_ceiling("resnet50", 112, "A100", G.AMP)
    assert at_112 == pytest.approx(4 * 2375)  # a quarter of the pixels, a quarter of the FLOPs
    # mobilenet_v2 has no published row: EfficientNet-B0's efficiency, said so.
    _, source = G.compute_ceiling("mobilenet_v2", 224, "V100", G.FP32)
    assert "assumed EfficientNet-B0's" in source
    assert G.compute_ceiling("custom", 224, "A100", G.AMP)[0] is None


def test_the_lower_ceiling_binds_and_the_line_says_what_lifts_it():
    # ml.p4d.24xlarge: 96 vCPUs, 8 A100 -> 6 physical cores per GPU. 300 images/s per core
    # -> an input ceiling of 1800 per GPU, under ResNet-50's 2375 AMP compute ceiling.
    fed = G.ceilings("ml.p4d.24xlarge", "resnet50", 224, G.AMP, 300.0, "measured")
    assert fed.cores_per_gpu == 6 and fed.input == pytest.approx(1800)
    assert fed.compute == pytest.approx(2375) and fed.per_gpu == pytest.approx(1800)
    assert fed.binding == "input"
    assert "the input binds (1,800 < 2,375 images/s per GPU)" in fed.fix()
    assert "more cores per GPU (6 here; 1.3x as many would feed it)" in fed.fix()
    assert "-p ImageRecords=resized" in fed.fix() and "ImageRecords" not in fed.fix(resized_records=True)
    # ml.g5.xlarge: 4 vCPUs, 1 A10G -> 2 cores; ResNet-50 fp32 on A10G's 62.5 TF32 TFLOP/s.
    g5 = G.ceilings("ml.g5.xlarge", "resnet50", 224, G.FP32, 2000.0, "measured")
    assert g5.cores_per_gpu == 2 and g5.input == pytest.approx(4000)
    assert g5.compute == pytest.approx((909 * 23.20e9 / 156e12) * 62.5e12 / 23.20e9)
    assert g5.binding == "compute" and "the GPU's compute binds" in g5.fix()
    assert G.ceilings("ml.c5.xlarge", "resnet50", 224, G.FP32, 300.0, "m") is None  # no GPU


def test_a_tables_mlp_gets_a_dense_ceiling_from_its_parameters_and_a_custom_model_a_reason():
    # 6 FLOPs per weight per row: 10,000 weights -> 60,000 FLOPs a row. A100 TF32 at ResNet-50's
    # utilisation (909 x 23.20e9 FLOP/s achieved) -> 909 x 23.20e9 / 6e4 = 351,480 rows/s.
    rows, source = G.compute_ceiling(G.DENSE, None, "A100", G.FP32, parameters=10_000)
    assert rows == pytest.approx(909 * 23.20e9 / 6e4)
    assert "0.06 MFLOP/row (6 x 10,000 trainable parameters" in source and "an upper bound" in source
    assert G.compute_ceiling(G.DENSE, None, "A100", G.FP32)[0] is None  # no parameter count recorded
    # A model of the user's own: no count, and the line says why.
    none, why = G.compute_ceiling("custom", 128, "A100", G.AMP)
    assert none is None and why.startswith("no FLOPs count for custom: a model of your own is not rebuilt")
    # Both ceilings in rows for a table; the input binds here (2 cores x 1,000 rows/s per core).
    table = G.ceilings("ml.g5.xlarge", G.DENSE, None, G.FP32, 1000.0, "measured", parameters=10_000, unit="rows")
    assert table.input == pytest.approx(2000) and table.binding == "input"
    assert "rows/s per GPU" in table.fix() and "ImageRecords" not in table.fix()
    assert table.input_source == "1000 rows/s per core (measured) x 2 cores per GPU"


def test_small_cnn_flops_match_the_benchmark_count():
    """The one FLOPs figure cheap enough to recount here (the others: see FLOPS_SOURCE)."""
    from benchmarks.training.flops import count_in_subprocess

    assert count_in_subprocess("small_cnn", 32).training == pytest.approx(G.SMALL_CNN_FLOPS_32, rel=1e-3)


def test_efficientnet_lite0_has_its_own_count_and_b0s_efficiency():
    rate, source = G.compute_ceiling("efficientnet_lite0", 224, "A100", G.AMP)
    b0, _ = G.compute_ceiling("efficientnet_b0", 224, "A100", G.AMP)
    assert rate == pytest.approx(b0 * G.FLOPS_224["efficientnet_b0"] / G.FLOPS_224["efficientnet_lite0"])
    assert "2.31 GFLOP/image" in source and "efficientnet_lite0.py" in source and "assumed EfficientNet-B0's" in source


@pytest.mark.slow
def test_efficientnet_lite0_flops_match_the_benchmark_count():
    """Recounted as FLOPS_224 says: the Keras network with its 1000-class top at 224 px (~30 s)."""
    import json
    import subprocess
    import sys

    from benchmarks.training.flops import REPO

    code = ("import json; from dataclasses import asdict; from benchmarks.training.flops import count; "
            "from training_entry.model.efficientnet_lite0 import build; "
            "print(json.dumps(asdict(count(build(224, include_top=True)))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"}).stdout
    counted = json.loads(out.strip().splitlines()[-1])
    assert counted["training"] == pytest.approx(G.FLOPS_224["efficientnet_lite0"], rel=1e-3)
    assert counted["parameters"] == 4_652_008


def test_an_efficientnet_lite0_job_at_the_default_image_size_is_advised_at_224_px():
    """Issue 50: what advise reads from a job with ModelArchitecture=efficientnet_lite0 and
    ImageSize=0 (the default: the architecture's own) is a 224-px image workload in either
    room, and its ceiling counts Lite0's own FLOPs there."""
    from pipeline.costs.advisor.observations import WorkloadId, resolve_workload

    tf_job = resolve_workload({"model-architecture": '"efficientnet_lite0"', "image-size": "0"}, None)
    assert tf_job == WorkloadId("efficientnet_lite0", "image", "224x224x3")
    torch_job = resolve_workload({"model-architecture": '"efficientnet_lite0"', "image-size": "0",
                                  "strategy": '"ddp"'}, None)
    assert torch_job == WorkloadId("efficientnet_lite0", "image", "224x224x3", "pytorch ddp")
    rate, source = G.compute_ceiling(tf_job.architecture, 224, "A100", G.AMP)
    assert rate > 0 and source.startswith("2.31 GFLOP/image")
