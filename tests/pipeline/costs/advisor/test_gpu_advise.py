"""``trainpipe advise --instance-types ml.g5.xlarge ml.p4d.24xlarge`` on a local photo run,
through the CLI's process: both ceilings per GPU type with their sources, the binding one and
what lifts it, before any job on a GPU (issue 39). The records are real: photographs of a
realistic size (500x375 JPEG, ~100 KB) through the PreprocessData entrypoint; the input rate is
measured on them by the advisor itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.costs.advisor.fixtures import write_run

# Processes: the processing entrypoint once, then advise, which measures the input in TensorFlow.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[4]
TRAINPIPE = [sys.executable, "-m", "pipeline"]
TRAIN_KEY = "trainpipe/photo/PreprocessData/output/train"


def write_photos(root: Path, per_class: int = 8, seed: int = 0, contrast: float = 1.0) -> None:
    """Synthetic photographs: 500x375 (a typical camera photo's aspect, as the ants/bees
    set's), smooth gradients, shapes and sensor-like noise, JPEG quality 90. ``contrast``: how
    far the shapes' colours lean to their class's palette from a shared one (1: all the way;
    lower makes the classes harder to tell apart)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:375, 0:500]
    # Per class, the colour of the things in the scene (dark red vs yellow): what tells them apart.
    palettes = {"ants": ((90, 150), (10, 50), (10, 50)), "bees": ((200, 255), (170, 230), (0, 60))}
    for name, palette in palettes.items():
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            angle = rng.uniform(0, np.pi)
            ramp = (x * np.cos(angle) + y * np.sin(angle)) / 2.5
            base = np.stack([ramp % 256, (ramp + 60) % 256, (255 - ramp) % 256], -1) * 0.6 + 50
            noisy = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
            image = Image.fromarray(noisy)
            draw = ImageDraw.Draw(image)
            for _ in range(8):
                x0, y0, w, h = rng.integers(0, 440), rng.integers(0, 315), *rng.integers(30, 140, 2)
                fill = tuple(int(contrast * rng.integers(*bounds) + (1 - contrast) * rng.integers(60, 200))
                             for bounds in palette)
                draw.ellipse([x0, y0, x0 + w, y0 + h], fill=fill)
            image.save(root / name / f"{i:03d}.jpg", quality=90)


@pytest.fixture(scope="module")
def photo_workdir(tmp_path_factory) -> Path:
    """A workdir holding a recorded local photo run of ``small_cnn`` at 128 px and one of
    ``resnet50`` at 224 px (mixed precision), both over the same real train shards."""
    from pipeline.local.jobs.contract import relocate
    from processing import contract as processing

    base = tmp_path_factory.mktemp("processing")
    write_photos(Path(relocate(processing.RAW_DATA_DIR, base)))
    subprocess.run([sys.executable, "-m", "processing.preprocess", "--instance-count", "1",
                    "--processes-per-host", "1"], check=True, cwd=REPO, capture_output=True,
                   env={**os.environ, "SAGEMAKER_BASE_DIR": str(base), "PYTHONPATH": str(REPO)})
    wd = tmp_path_factory.mktemp("wd")
    shutil.copytree(relocate(processing.OUTPUT_DIRS["train"], base), wd / "store" / "bucket" / TRAIN_KEY)
    steps = dict(hosts=1, ppn=1, batch=32, step_seconds=[1.0, 0.2, 0.2], cpu_seconds=[0.4, 0.4, 0.4])
    write_run(wd, "cnn", **steps, parameters=94538, start="2026-11-01T10:00:00.000+00:00",
              workload={"architecture": "small_cnn", "kind": "image", "image_size": 128, "records": 11,
                        "train_uri": f"s3://bucket/{TRAIN_KEY}"})
    # A model of the user's own (a model file): no FLOPs count is kept with its run.
    write_run(wd, "mine", **steps, parameters=120_000, start="2026-10-30T10:00:00.000+00:00",
              workload={"architecture": "custom", "kind": "image", "image_size": 128, "records": 11,
                        "train_uri": f"s3://bucket/{TRAIN_KEY}"})
    # The same network and records trained in the PyTorch room (decoded once, before its first epoch).
    write_run(wd, "torch", **steps, parameters=94538, start="2026-10-29T10:00:00.000+00:00",
              workload={"architecture": "small_cnn", "kind": "image", "image_size": 128, "records": 11,
                        "strategy": "ddp", "train_uri": f"s3://bucket/{TRAIN_KEY}"})
    write_run(wd, "resnet", **steps, parameters=23_500_000, start="2026-11-02T10:00:00.000+00:00",
              workload={"architecture": "resnet50", "kind": "image", "image_size": 224, "records": 11,
                        "mixed_precision": "mixed_float16", "train_uri": f"s3://bucket/{TRAIN_KEY}"})
    return wd


def advise(workdir: Path, *args: str) -> str:
    done = subprocess.run([*TRAINPIPE, "advise", "--workdir", str(workdir), "--plot", str(workdir / "a.png"),
                           "--instance-types", "ml.g5.xlarge", "ml.p4d.24xlarge", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _ceilings(out: str, itype: str) -> tuple[float, float, float, float]:
    """(compute, input, per-core rate, cores per GPU) as printed for ``itype``."""
    block = out.split(f"  {itype} (")[1]
    compute = float(re.search(r"compute ceiling ([\d,]+) images/s per GPU", block)[1].replace(",", ""))
    found = re.search(r"input ceiling +([\d,]+) images/s per GPU: (\d+) images/s per core \(measured here on "
                      r"\w+'s 1 train shard\(s\), \d+ px, crop_flip, 1 core\) x ([\d.]+) cores per GPU", block)
    return compute, float(found[1].replace(",", "")), float(found[2]), float(found[3])


def test_a_light_model_on_photos_is_fed_by_too_few_cores(photo_workdir):
    out = advise(photo_workdir, "--workload", "small_cnn tensorflow")
    for itype, cores in (("ml.g5.xlarge", 2), ("ml.p4d.24xlarge", 6)):
        assert f"  {itype} (" in out and f"{cores} cores per GPU): predicted from the small_cnn on images " \
            "128x128x3 runs here, before any job on it:" in out
        compute, feed, per_core, per_gpu_cores = _ceilings(out, itype)
        assert per_gpu_cores == cores and feed == pytest.approx(per_core * cores, rel=0.01)
        assert "DeepLearningExamples" in out and "assumed ResNet-50's: dense convolutions" in out
        # A 3-layer CNN at 128 px asks ~1 GFLOP of an image: no core keeps up with a GPU.
        assert feed < compute
        assert f"    {itype}: the input binds ({feed:,.0f} < {compute:,.0f} images/s per GPU)" in out
        # The fixture's runs predate ImageRecords (the files kept): resized records are one way.
        assert "more cores per GPU" in out and "fewer GPUs per instance" in out and "-p ImageRecords=resized" in out
    rows = [line for line in out.splitlines() if line.startswith("  ml.p4d.24xlarge ")]
    assert rows and "n/a" not in rows[0]  # its time, cost and CO2e per run, as for any candidate
    # The rate is measured once per records, size and augmentation, then read back.
    cached = (photo_workdir / "input-rate.json").stat().st_mtime_ns
    advise(photo_workdir, "--workload", "small_cnn tensorflow")
    assert (photo_workdir / "input-rate.json").stat().st_mtime_ns == cached


def test_resnet50_in_mixed_precision_on_a_single_gpu_type(photo_workdir):
    out = advise(photo_workdir)  # the latest run: resnet50 at 224 px, mixed_float16
    assert "advising for: resnet50 on images 224x224x3 (the latest run's" in out
    compute, feed, _, _ = _ceilings(out, "ml.p4d.24xlarge")
    assert compute == pytest.approx(2375, abs=1)  # DeepLearningExamples' A100 AMP row, its calibration
    binding = "the input binds" if feed < compute else "the GPU's compute binds"
    assert f"    ml.p4d.24xlarge: {binding} (" in out
    compute_g5, _, _, _ = _ceilings(out, "ml.g5.xlarge")
    assert compute_g5 < compute  # an A10G's 125 FP16 TFLOP/s against an A100's 312


def test_a_model_of_ones_own_gets_the_input_ceiling_and_says_why_no_compute_one(photo_workdir):
    out = advise(photo_workdir, "--workload", "custom")
    for itype in ("ml.g5.xlarge", "ml.p4d.24xlarge"):
        block = out.split(f"  {itype} (")[1]
        assert "    compute ceiling unknown: no FLOPs count for custom: a model of your own is not rebuilt " \
            "from its run" in block
        assert re.search(r"    input ceiling +[\d,]+ images/s per GPU: \d+ images/s per core \(measured here", block)
        assert f"    {itype}: one ceiling is unknown: the other bounds it from above" in block
    rows = [line for line in out.splitlines() if line.startswith("  ml.p4d.24xlarge ")]
    assert rows and "n/a" not in rows[0]  # priced from the input ceiling, an upper bound


def test_a_pytorch_run_gets_no_input_ceiling_since_its_room_decodes_once(photo_workdir):
    # The same network and shape in both rooms: "small_cnn" alone names two, and the refusal
    # gives each its words.
    done = subprocess.run([*TRAINPIPE, "advise", "--workdir", str(photo_workdir), "--workload", "small_cnn"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2
    assert ("'small_cnn 128x128x3 tensorflow': small_cnn on images 128x128x3; "
            "'small_cnn 128x128x3 pytorch ddp': small_cnn on images 128x128x3 (pytorch ddp)") in done.stderr
    out = advise(photo_workdir, "--workload", "small_cnn 128x128x3 pytorch ddp")
    assert "advising for: small_cnn on images 128x128x3 (pytorch ddp)" in out
    for itype in ("ml.g5.xlarge", "ml.p4d.24xlarge"):
        block = out.split(f"  {itype} (")[1]
        assert re.search(r"    compute ceiling [\d,]+ images/s per GPU: ", block)
        assert ("    input ceiling unknown: no input ceiling: the PyTorch room (pytorch ddp) decodes each record "
                "once before its first epoch (training_torch/data.py), so no epoch waits on decoding") in block
        assert f"    {itype}: one ceiling is unknown: the other bounds it from above" in block


def test_a_table_run_gets_a_dense_compute_ceiling_and_its_rows_parse_rate(tmp_path):
    from pipeline.data.default import DIGITS_FILENAME, digits_csv
    from pipeline.local.jobs.contract import relocate
    from processing import contract as processing

    base = tmp_path / "processing"
    raw = Path(relocate(processing.RAW_DATA_DIR, base))
    raw.mkdir(parents=True)
    (raw / DIGITS_FILENAME).write_bytes(digits_csv())
    subprocess.run([sys.executable, "-m", "processing.preprocess", "--instance-count", "1",
                    "--processes-per-host", "1"], check=True, cwd=REPO, capture_output=True,
                   env={**os.environ, "SAGEMAKER_BASE_DIR": str(base), "PYTHONPATH": str(REPO)})
    wd = tmp_path / "wd"
    output = wd / "store" / "bucket" / "trainpipe/tables/PreprocessData/output"
    for name in ("train", processing.OUTPUT_MANIFEST):  # the records and their manifest, as a run leaves them
        shutil.copytree(relocate(processing.OUTPUT_DIRS[name], base), output / name)
    write_run(wd, "digits", hosts=1, ppn=1, batch=32, step_seconds=[1.0, 0.01, 0.01], cpu_seconds=[0.01] * 3,
              parameters=17_226, workload={"architecture": "mlp", "kind": "table", "num_features": 64,
                                           "records": 1437, "train_uri": f"s3://bucket/{output.relative_to(wd / 'store' / 'bucket')}/train"})
    out = advise(wd)
    assert "advising for: mlp on table 64 features" in out
    block = out.split("  ml.p4d.24xlarge (")[1]
    # 6 x 17,226 = 103,356 FLOPs a row over the A100's 156 TFLOP/s TF32 at ResNet-50's utilisation.
    compute = float(re.search(r"compute ceiling ([\d,]+) rows/s per GPU: 0.103 MFLOP/row \(6 x 17,226 "
                              r"trainable parameters", block)[1].replace(",", ""))
    assert compute == pytest.approx(909 * 23.20e9 / 103_356, rel=0.01)  # = the TF32 ResNet-50 row's FLOP/s
    assert "an upper bound, a model this small does not fill a GPU" in block
    found = re.search(r"input ceiling +([\d,]+) rows/s per GPU: (\d+) rows/s per core \(measured here on "
                      r"digits's \d+ train shard\(s\), rows parsed, 1 core\) x 6 cores per GPU", block)
    assert found, block
    assert float(found[1].replace(",", "")) == pytest.approx(6 * float(found[2]), rel=0.01)
    assert "    ml.p4d.24xlarge: the input binds (" in block and "ImageRecords" not in block


def test_a_table_run_whose_records_are_gone_is_not_priced_from_its_compute_bound_alone(tmp_path):
    write_run(tmp_path, "gone", hosts=1, ppn=1, batch=32, step_seconds=[1.0, 0.01, 0.01], cpu_seconds=[0.01] * 3,
              parameters=17_226, workload={"architecture": "mlp", "kind": "table", "num_features": 64,
                                           "records": 1437, "train_uri": "s3://bucket/cleaned/train"})
    out = advise(tmp_path)
    block = out.split("  ml.g5.xlarge (")[1]
    assert "    input ceiling unknown: input not measured: gone/TrainModel's train records are not in this workdir's store" in block
    assert "    ml.g5.xlarge: not priced: for a table only the input ceiling says what a GPU will do" in block
    assert not [line for line in out.splitlines() if line.startswith("  ml.g5.xlarge ") and "1x" in line]
