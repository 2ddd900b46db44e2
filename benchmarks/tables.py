"""Tables of typed columns: PreprocessData's rate and peak memory on a 1,000,000-row mixed-type
CSV, and the training input rate of its records against today's numeric table of the same shape.

The CSV is ``tests.processing.mixed_table``'s (string labels first, a categorical column with
the signal, numeric and categorical noise, 5% missing values), written in blocks. Processing
runs as the container runs it (``python -m processing.preprocess``, 2 instances x 1 process =
2 shards per split) in its own process; as in ``benchmarks.image_processing`` the step's own
peak is measured apart from TensorFlow's import (``/proc/self/clear_refs`` then VmHWM).

The input rate: this rank's train shards through ``training_entry.input.datasets._batches``
(File mode, streamed: the parse per block of batches that training runs), records/s over the
same number of rows, the mixed table's typed records against a numeric table with as many
feature columns whose label is last (today's float-vector records), interleaved; the ratio is
mixed / numeric (goal >= 0.8).

    .venv/bin/python -m benchmarks.tables [--rows 1000000] [--input-rows 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

from benchmarks import harness as h

STEP_ARGS = ["--label-column", "species", "--instance-count", "2", "--processes-per-host", "1"]
_MEMORY = re.compile(r"STEP-MEMORY start_kb=(\d+) peak_kb=(\d+)")
_SUMMARY = re.compile(r"preprocess: (\d+) records from .* in ([\d.]+)s")
BLOCK = 100_000


def write_mixed(path: Path, rows: int) -> None:
    from tests.processing import mixed_table

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(",".join(mixed_table.HEADER) + "\n")
        for block, start in enumerate(range(0, rows, BLOCK)):
            for row in mixed_table.rows(min(BLOCK, rows - start), seed=block):
                f.write(",".join(row) + "\n")


def write_numeric(path: Path, rows: int, features: int) -> None:
    """Today's table: as many numeric feature columns, label 0..2 last, no gaps."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write(",".join([f"f{i}" for i in range(features)] + ["label"]) + "\n")
        for start in range(0, rows, BLOCK):
            n = min(BLOCK, rows - start)
            x = rng.normal(size=(n, features)).round(3)
            y = rng.integers(0, 3, n)
            f.writelines(",".join(map(str, r)) + f",{label}\n" for r, label in zip(x.tolist(), y.tolist(), strict=True))


def _kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def measure_step(args: list[str]) -> int:
    from processing.preprocess import main as preprocess

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # Linux >= 4.0: reset VmHWM to the current RSS
    start = _kb("VmRSS")
    code = preprocess(args)
    print(f"STEP-MEMORY start_kb={start} peak_kb={_kb('VmHWM')}", flush=True)
    return code


def run_step(base: Path, args: list[str]) -> dict:
    shutil.rmtree(base / "processing" / "output", ignore_errors=True)
    env = h.quiet_env({"SAGEMAKER_BASE_DIR": str(base)})
    proc = subprocess.Popen([h.PYTHON, "-m", "benchmarks.tables", "--measure-step", *args], cwd=h.REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    match, memory = _SUMMARY.search(output), _MEMORY.search(output)
    if code != 0 or not match or not memory:
        raise RuntimeError(f"preprocess failed (exit {code}):\n{output[-2000:]}")
    return {"records": int(match[1]), "step_s": float(match[2]), "process_peak_mb": usage.ru_maxrss / 1024,
            "step_start_mb": int(memory[1]) / 1024, "step_peak_mb": int(memory[2]) / 1024}


def input_rate(base: Path, batch_size: int = 256) -> float:
    """records/s of one rank's train shard through the training input's parse path."""
    import tensorflow as tf

    from training_entry.input import datasets, records

    manifest = records.Manifest.load(str(base / "processing/output/manifest/train.json"))
    shard = sorted((base / "processing/output/train").glob("*.tfrecord"))[0]
    ctx = SimpleNamespace(image_size=None, num_features=manifest.num_features, columns=manifest.columns)
    plan = SimpleNamespace(batch_size=batch_size)
    ds = datasets._batches(tf.data.TFRecordDataset([str(shard)], buffer_size=1 << 20), plan, ctx, training=True)
    started, count = time.perf_counter(), 0
    for _, y in ds:
        count += int(y.shape[0])
    return count / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.tables", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the processing benchmark's CSV")
    parser.add_argument("--input-rows", type=int, default=200_000, help="rows of both input-rate tables")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--measure-step", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.measure_step:
        return measure_step(rest)
    work = h.work_dir("tables")
    big = work / f"mixed-{args.rows}"
    csv = big / "processing/input/data/penguins.csv"
    if not csv.exists():
        started = time.perf_counter()
        write_mixed(csv, args.rows)
        h.say(f"generated {args.rows} mixed rows ({csv.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f}s")
    run = run_step(big, STEP_ARGS)
    rate = run["records"] / run["step_s"]
    h.say(f"Typed-columns processing: {run['records']} rows, {csv.stat().st_size / 1e6:.0f} MB CSV, 2 shards per "
          f"split: {run['step_s']:.1f}s by the step's clock; process peak {run['process_peak_mb']:.0f} MB, "
          f"step start {run['step_start_mb']:.0f} MB, step peak {run['step_peak_mb']:.0f} MB")
    h.result("tables_processing_records_per_s", rate, "-")
    h.result("tables_processing_step_peak_mb", run["step_peak_mb"] - run["step_start_mb"], "-")

    mixed, numeric = work / f"input-mixed-{args.input_rows}", work / f"input-numeric-{args.input_rows}"
    if not (mixed / "processing/input/data/penguins.csv").exists():
        write_mixed(mixed / "processing/input/data/penguins.csv", args.input_rows)
    if not (numeric / "processing/input/data/numeric.csv").exists():
        write_numeric(numeric / "processing/input/data/numeric.csv", args.input_rows, features=5)
    run_step(mixed, STEP_ARGS)
    run_step(numeric, ["--instance-count", "2", "--processes-per-host", "1"])
    rates = h.interleave({"mixed": lambda: input_rate(mixed), "numeric": lambda: input_rate(numeric)}, args.repeats)
    h.say(f"Training input, one rank's train shard ({args.input_rows} rows in all, 5 feature columns), File mode "
          f"streamed: mixed {h.spread(rates['mixed'])} records/s, numeric {h.spread(rates['numeric'])} records/s")
    h.result("tables_input_rate_mixed_over_numeric", h.median(rates["mixed"]) / h.median(rates["numeric"]), 0.8)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
