"""This machine's decode-and-augment images/s per core on a run's own image records, or
parse rows/s per core on a table run's records (the input ceiling's numerator,
``gpus.ceilings``): measured once per records, size and augmentation by
``training_entry/input/rate.py`` in a subprocess (``pipeline`` never imports TensorFlow) and
kept in ``<workdir>/input-rate.json``, so ``advise`` pays for it once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.costs.advisor.observations import PYTORCH_ENGINE, Observation, store_path
from processing.contract import OUTPUT_MANIFEST
from training_entry.input.records import KIND_TABLE, manifest_name

RATE_FILE = "input-rate.json"
REPO_ROOT = Path(__file__).resolve().parents[3]
SECONDS = 3.0


def shards_of(workdir: Path, run: Observation) -> list[Path]:
    folder = store_path(workdir, run.train_uri) if run.train_uri else None
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(".tfrecord"))


def per_core(workdir: Path, run: Observation, image_size: int | None) -> tuple[float | None, str]:
    """(images/s per core, its source) for ``run``'s train records at ``image_size`` (a table
    run's: rows/s parsed per core, ``image_size`` unused); None and why where the records, or
    a table's manifest, are not on this machine, or where the run's room does not decode per epoch."""
    if run.workload.engine.startswith(PYTORCH_ENGINE):
        # The decode-and-augment rate measured here is the TensorFlow room's tf.data pipeline,
        # which decodes every epoch; the PyTorch room decodes each record once, before its first
        # epoch, and slices batches from memory: its epochs wait on no decoding, so this rate
        # bounds nothing there. (Measured: a 64-px small_cnn PyTorch run predicted 121,468
        # images/s per H100 from this ceiling, where one H100 ran the entrypoint at 50,980;
        # benchmarks/notes.md.)
        return None, (f"no input ceiling: the PyTorch room ({run.workload.engine}) decodes each record once "
                      "before its first epoch (training_torch/data.py), so no epoch waits on decoding")
    shards = shards_of(workdir, run)
    if not shards:
        return None, (f"input not measured: {run.source}'s train records are not in this workdir's store "
                      "(a cloud job, or a cleaned store); run the workload once with --local")
    name = run.source.split("/")[0]
    if run.workload.kind == KIND_TABLE:
        # The processing step writes the split's manifest beside its records' folder.
        manifest = shards[0].parent.parent / OUTPUT_MANIFEST / manifest_name("train")
        if not manifest.is_file():
            return None, f"input not measured: {name}'s train manifest is not beside its records ({manifest})"
        key, what = f"{run.train_uri}|table", ["--manifest", str(manifest)]
        source = f"measured here on {name}'s {len(shards)} train shard(s), rows parsed, 1 core"
    else:
        key = f"{run.train_uri}|{image_size}|{run.augmentation}"
        what = ["--image-size", str(image_size), "--augmentation", run.augmentation]
        source = (f"measured here on {name}'s {len(shards)} train shard(s), "
                  f"{image_size} px, {run.augmentation}, 1 core")
    cache = Path(workdir) / RATE_FILE
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return float(known[key]), source
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2",
           "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "training_entry.input.rate", *what,
                           "--seconds", str(SECONDS), *map(str, shards)],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return None, f"input not measured: {lines[-1] if lines else f'rate exited {done.returncode}'}"
    rate = float(json.loads(done.stdout.strip().splitlines()[-1])["images_per_s_per_core"])
    known[key] = rate
    cache.write_text(json.dumps(known, indent=1))
    return rate, source
