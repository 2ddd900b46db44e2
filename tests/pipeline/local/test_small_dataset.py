"""End to end on a small image set with the defaults (issue 23): 245 photos in 2 classes, as
the canonical transfer-learning set (hymenoptera: ants and bees), small CNN, 2 hosts,
BatchSize 32. Its validation split is 37 images, 18 and 19 a rank: fewer than one batch,
so validation runs in partial batches (training_entry/input/plan.py). Slow:

    .venv/bin/pytest tests/pipeline/local/test_small_dataset.py -m slow
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pipeline.data.png import encode_png
from pipeline.definition import build as D
from pipeline.local.hosts import mpi
from pipeline.local.store.storage import LocalStorage
from pipeline.settings import PLACEHOLDER_BUCKET, Settings

from .test_end_to_end import execution, steps, trainpipe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed"),
]
PHOTOS = f"s3://{PLACEHOLDER_BUCKET}/{Settings().prefix}/data/ants-bees/"
SIDE = 24


def striped(rng: random.Random, horizontal: bool) -> bytes:
    """An RGB PNG of noisy stripes: horizontal for ants, vertical for bees (learnable)."""
    phase, period = rng.randrange(6), rng.choice((4, 6))
    rows = []
    for y in range(SIDE):
        row = bytearray()
        for x in range(SIDE):
            on = ((y if horizontal else x) + phase) % period < period // 2
            value = max(0, min(255, (200 if on else 50) + rng.randint(-40, 40)))
            row += bytes((value, value, max(0, value - 30)))
        rows.append(row)
    return encode_png(rows, SIDE, channels=3)


def put_photos(storage: LocalStorage, counts: dict[str, int]) -> None:
    rng = random.Random(23)
    for name, count in counts.items():
        for i in range(count):
            storage.put_bytes(striped(rng, name == "ants"), f"{PHOTOS}{name}/{name}_{i:03d}.png")


def test_245_photos_in_two_classes_train_with_the_defaults(tmp_path):
    put_photos(LocalStorage(tmp_path / "store"), {"ants": 123, "bees": 122})
    # The defaults: ModelArchitecture auto (small_cnn for images), TrainingInstanceCount 2,
    # BatchSize 32. Two epochs keep it short; AccuracyThreshold 0 makes it a run that must
    # complete, not one that must learn in two epochs.
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), "-p", f"InputDataUri={PHOTOS}",
                       "-p", "Epochs=2", "-p", "AccuracyThreshold=0", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().splitlines()[-1].endswith("Succeeded")
    train = steps(execution(tmp_path))[D.STEP_TRAIN]
    log = (Path(train["job_dir"]) / "job.log").read_text()
    # 171 training images, 85 a rank: 2 steps of 32; 18 and 19 validation images a rank: 1 step.
    assert "2 ranks (2 host(s) x 1); train File/ShardedByS3Key: 2 steps of 32 per rank per epoch; validation 1 steps" in log
    assert "model small_cnn" in log
    assert "val_accuracy" in train["metrics"]
    assert steps(execution(tmp_path))[D.STEP_EVALUATE]["status"] == "Succeeded"
