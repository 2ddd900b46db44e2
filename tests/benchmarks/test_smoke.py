"""Every benchmark script runs on tiny sizes and prints its RESULT lines (no timing asserted)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULT = re.compile(r"^RESULT (\S+) (\S+) target (\S+)$", re.MULTILINE)

pytestmark = pytest.mark.slow


def run(module: str, *args: str, work: Path, timeout: float = 300) -> dict[str, str]:
    env = {**os.environ, "TRAINPIPE_BENCH_WORK": str(work), "PYTHONPATH": str(REPO),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = {name: value for name, value, _ in RESULT.findall(proc.stdout)}
    assert found, f"no RESULT lines:\n{proc.stdout[-3000:]}"
    for value in found.values():
        float(value)  # a number (nan allowed), not prose
    return found


def test_p1_local_scaling(tmp_path):
    found = run("benchmarks.training.scaling.p1_local_scaling", "--quick", "--replicate", "1", "--epochs", "2",
                "--repeats", "1", work=tmp_path)
    assert {"p1_local_scaling", "p1_local_scaling_naive", "p1_end_to_end_ratio",
            "p1_vs_best_single_process", "p1_samples_per_s_best_single_process"} <= set(found)


def test_p2_pipe_reader(tmp_path):
    found = run("benchmarks.input.p2_pipe_reader", "--replicate", "1", "--shards", "2", "--repeats", "1",
                work=tmp_path)
    assert {"p2_pipe_vs_file_ratio", "p2_reader_alone_ratio",
            "p2_pipe_vs_file_channel_with_staging"} <= set(found)


def test_p3_runner_overhead(tmp_path):
    found = run("benchmarks.training.scaling.p3_runner_overhead", "--repeats", "1", "-p", "Epochs=1", "-p", "WarmupEpochs=0",
                "-p", "AccuracyThreshold=0",
                work=tmp_path)
    assert {"p3_runner_overhead_share", "p3_pipeline_wall_s", "p3_tracking_s"} <= set(found)


def test_p4_processing(tmp_path):
    found = run("benchmarks.input.p4_processing", "--replicate", "1", "--shards", "3", "--repeats", "1",
                work=tmp_path)
    assert float(found["p4_shard_size_spread_records"]) <= 1  # a property, not a timing


def test_growth_from_recorded_figures(tmp_path):
    # The figures P1-P3 record at each size (synthetic here): growth fits, prints and plots.
    figures = tmp_path / "figures"
    figures.mkdir()
    for r in (1, 2):
        (figures / f"p1-x{r}.json").write_text(json.dumps({
            "records": 1000 * r, "one_process": {"steady": 1.0, "wall": 5.0 + r, "train_seconds": r},
            "tuned_1x2": {"steady": 1.0, "wall": 6.0 + r, "train_seconds": r}}))
        (figures / f"p2-x{r}.json").write_text(json.dumps({
            "records": 1000 * r, "file_dataset": 100.0, "pipe_dataset": 50.0, "pipe_dataset_chunked": 90.0}))
        (figures / f"p3-x{r}.json").write_text(json.dumps({
            "records": 1797 * r, "wall": 20.0 + r, "inside": 18.0 + r, "outside": 2.0, "share": 0.1}))
    plot = tmp_path / "growth.png"
    found = run("benchmarks.training.scaling.growth", "--sizes", "1,2", "--plot", str(plot), work=tmp_path)
    assert {"growth_p1_tuned_1x2_fit_r2", "growth_p2_pipe_fit_r2", "growth_p3_pipeline_fit_r2"} <= set(found)
    assert plot.stat().st_size > 0


def test_p5_advisor(tmp_path):
    from training_entry.contract import DEFAULT_STEPS_PER_EXECUTION

    # Both workloads and layouts at the default StepsPerExecution only. The StepsPerExecution-1
    # cases make bench also runs differ by that one hyperparameter (p5.cases, checked in
    # advisor/test_p5_advisor.py), so running them here would only double the jobs.
    # --mlp-epochs 2: the MLP's ten epochs exist to find a quiet window for make bench's figure; a
    # smoke run needs one steady epoch after the traced one, as the CNN's --epochs 2 gives it.
    found = run("benchmarks.advisor.p5_advisor", "--replicate", "1", "--epochs", "2", "--mlp-epochs", "2",
                "--repeats", "1", "--steps-per-execution", str(DEFAULT_STEPS_PER_EXECUTION), work=tmp_path,
                timeout=1500)
    assert {"advisor_relative_error", "advisor_published_error"} <= set(found)
    assert {f"advisor_error_{w}_{layout}" for w in ("mlp", "cnn") for layout in ("1x2", "2x1")} <= set(found)


def test_image_processing(tmp_path):
    found = run("benchmarks.input.image_processing", "--sizes", "60,120", "--side", "16", "--repeats", "1",
                work=tmp_path)
    assert {"images_per_s_60", "images_per_s_120", "images_peak_rss_growth_ratio",
            "images_step_rss_bytes_per_image"} <= set(found)
    assert float(found["images_shard_bytes_ratio"]) < 1.5  # the files as they are, not decoded pixels


def test_p6_namespaces(tmp_path):
    found = run("benchmarks.training.scaling.p6_namespaces", "--repeats", "1", work=tmp_path)
    assert {"p6_processing_ratio", "p6_training_ratio"} <= set(found)


def test_image_input(tmp_path):
    # P1 on the CNN workload is test_p1_local_scaling's code with --workload cnn; the CNN's
    # training runs themselves are test_p5_advisor's (its cnn cases), so none is repeated here.
    found = run("benchmarks.input.image_input", "--batches", "5", "--repeats", "1", work=tmp_path)
    assert {"image_input_images_per_s", "image_step_demand_images_per_s", "image_input_vs_step"} <= set(found)


def test_mfu_mlp_and_a_before_after_variant(tmp_path):
    found = run("benchmarks.training.mfu", "--only", "mlp", "--repeats", "1", "--compare", "no_input",
                work=tmp_path)
    assert {"mfu_mlp_1p", "mfu_mlp_2r", "mfu_mlp_1p_no_input"} <= set(found)


def test_mirrored_probe(tmp_path):
    found = run("benchmarks.training.probes.mirrored_probe", "--floats", "1", "--matmuls", "1", "--repeats", "1", work=tmp_path)
    assert {"mirrored_allreduce_bare_ms_one_float", "mirrored_allreduce_in_step_ms_one_float",
            "mirrored_allreduce_in_step_vs_bare_one_float"} <= set(found)
