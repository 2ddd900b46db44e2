"""Images: PreprocessData on a generated image tree, images/s and peak memory vs data size.

A tree of ``<class>/<i>.jpg`` noise images (10 classes; JPEG of noise barely compresses, so
the data is large for its image count) is generated once at the largest size; smaller trees
hard-link a prefix of it. Each size is processed by ``python -m processing.preprocess`` as the
container runs it (2 instances x 2 processes per host = 4 shards per split), in its own
process. Importing TensorFlow sets that process's high-water mark (~450 MB) above anything the
step adds, so the step's own peak is measured apart: once the step's modules are imported,
the child resets the kernel's peak-RSS counter (``/proc/self/clear_refs``, "5") and reads
VmHWM when the step is done. The step decodes every image before writing and then streams the
files' bytes into shards, so its peak memory should stay flat while the data grows: the
headline figure is the step's peak RSS above its starting RSS at the largest size, over the
data's own size, beside the process peak (``wait4``) at each size. Images/s are from the step's own clock (after Python and TensorFlow start),
sizes interleaved over the repetitions.

    .venv/bin/python -m benchmarks.input.image_processing [--sizes 1250,5000,20000] [--side 64] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import harness as h

CLASSES = 10
_SUMMARY = re.compile(r"preprocess: (\d+) images .* decoded (\d+) image\(s\) in ([\d.]+)s .* in ([\d.]+)s")


def generate(root: Path, count: int, side: int) -> None:
    """``count`` distinct noise JPEGs, class i holding images i, i+10, ... (quality 90)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for label in range(CLASSES):
        (root / f"class{label}").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        pixels = rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8)
        data = tf.io.encode_jpeg(pixels, quality=90).numpy()
        (root / f"class{i % CLASSES}" / f"{i:06d}.jpg").write_bytes(data)


def tree_of(pool: Path, base: Path, count: int) -> Path:
    """An /opt/ml tree whose raw data dir hard-links the first ``count`` images of ``pool``."""
    raw = base / "processing" / "input" / "data"
    if raw.exists():
        return raw
    for label in range(CLASSES):
        (raw / f"class{label}").mkdir(parents=True)
    for i in range(count):
        name = f"class{i % CLASSES}/{i:06d}.jpg"
        os.link(pool / name, raw / name)
    return raw


STEP_ARGS = ["--instance-count", "2", "--processes-per-host", "2"]
_MEMORY = re.compile(r"STEP-MEMORY start_kb=(\d+) peak_kb=(\d+)")


def _kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def measure_step() -> int:
    """The child: preprocess's main() as the container runs it, with the step's own peak RSS
    (the peak counter reset after the imports) printed on one line."""
    from processing.preprocess import main as preprocess

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # Linux >= 4.0: reset VmHWM to the current RSS
    start = _kb("VmRSS")
    code = preprocess(STEP_ARGS)
    print(f"STEP-MEMORY start_kb={start} peak_kb={_kb('VmHWM')}", flush=True)
    return code


def run_step(base: Path) -> dict:
    """One preprocess run in its own process: peak RSS (process, and the step's own), wall
    time and the step's clock."""
    shutil.rmtree(base / "processing" / "output", ignore_errors=True)
    env = h.quiet_env({"SAGEMAKER_BASE_DIR": str(base)})
    started = time.perf_counter()
    proc = subprocess.Popen(
        [h.PYTHON, "-m", "benchmarks.input.image_processing", "--measure-step"],
        cwd=h.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    match, memory = _SUMMARY.search(output), _MEMORY.search(output)
    if proc.returncode != 0 or not match or not memory:
        raise RuntimeError(f"preprocess failed (exit {proc.returncode}):\n{output[-2000:]}")
    images, decoded, decode_s, step_s = int(match[1]), int(match[2]), float(match[3]), float(match[4])
    shards = sum(p.stat().st_size for p in (base / "processing" / "output").rglob("*.tfrecord"))
    return {"images": images, "decoded": decoded, "decode_s": decode_s, "step_s": step_s, "wall_s": wall,
            "peak_rss_mb": usage.ru_maxrss / 1024, "shard_bytes": shards,
            "step_start_mb": int(memory[1]) / 1024, "step_peak_mb": int(memory[2]) / 1024,
            "step_growth_mb": (int(memory[2]) - int(memory[1])) / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.input.image_processing", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1250,5000,20000", help="images per tree, comma-separated")
    parser.add_argument("--side", type=int, default=64, help="image width and height in pixels")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--measure-step", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_step:
        return measure_step()
    sizes = sorted(int(s) for s in args.sizes.split(","))

    work = h.work_dir("images")
    pool = work / f"pool-{sizes[-1]}-{args.side}"
    if not (pool / ".complete").exists():
        shutil.rmtree(pool, ignore_errors=True)
        started = time.perf_counter()
        generate(pool, sizes[-1], args.side)
        (pool / ".complete").write_text("")
        h.say(f"generated {sizes[-1]} {args.side}x{args.side} JPEGs in {time.perf_counter() - started:.1f}s")
    bases = {n: work / f"tree-{n}-{args.side}" for n in sizes}
    data_mb = {}
    for n, base in bases.items():
        raw = tree_of(pool, base, n)
        data_mb[n] = sum(p.stat().st_size for p in raw.rglob("*.jpg")) / 1e6

    h.say(f"Image processing: trees of {', '.join(map(str, sizes))} {args.side}x{args.side} JPEGs in "
          f"{CLASSES} classes, 4 shards per split, {args.repeats} interleaved repetition(s)")
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    for rep in range(args.repeats):
        order = sizes[rep % len(sizes):] + sizes[: rep % len(sizes)]
        for n in order:
            runs[n].append(run_step(bases[n]))

    h.say(f"  {'images':>7} {'data MB':>8} {'shards MB':>9} {'images/s':>22} {'decode share':>12} "
          f"{'wall s':>7} {'process peak MB':>15} {'step start MB':>13} {'step peak MB':>12} {'step adds MB':>12}")
    rate, rss, added = {}, {}, {}
    for n in sizes:
        rates = [r["images"] / r["step_s"] for r in runs[n]]
        rate[n] = h.median(rates)
        rss[n] = max(r["peak_rss_mb"] for r in runs[n])
        added[n] = max(r["step_growth_mb"] for r in runs[n])
        last = runs[n][-1]
        assert last["images"] == last["decoded"] == n, last
        h.say(f"  {n:>7} {data_mb[n]:>8.1f} {last['shard_bytes'] / 1e6:>9.1f} {h.spread(rates):>22} "
              f"{h.median(r['decode_s'] / r['step_s'] for r in runs[n]):>12.0%} "
              f"{h.median(r['wall_s'] for r in runs[n]):>7.1f} {rss[n]:>15.1f} "
              f"{max(r['step_start_mb'] for r in runs[n]):>13.1f} "
              f"{max(r['step_peak_mb'] for r in runs[n]):>12.1f} {added[n]:>12.1f}")
    small, large = sizes[0], sizes[-1]
    growth = rss[large] / rss[small]
    h.say(f"  data grows x{data_mb[large] / data_mb[small]:.1f} ({data_mb[large] - data_mb[small]:.0f} MB) "
          f"from {small} to {large} images; process peak RSS x{growth:.3f} ({rss[large] - rss[small]:+.0f} MB); "
          f"the step itself adds {added[small]:.1f} MB at {small} images and {added[large]:.1f} MB at {large} "
          f"({added[large] / data_mb[large]:.1%} of the data, which it would need all of to hold it)")
    shard_ratio = runs[large][-1]["shard_bytes"] / (data_mb[large] * 1e6)
    h.say(f"  shard bytes / image bytes at {large}: {shard_ratio:.4f} (the files stored as they are, "
          f"plus label, class name, size and framing)")
    for n in sizes:
        h.result(f"images_per_s_{n}", rate[n], "-")
        h.result(f"images_peak_rss_mb_{n}", rss[n], "-")
    h.result("images_peak_rss_growth_ratio", growth, "<=1.1")
    h.result(f"images_step_rss_added_mb_{large}", added[large], "-")
    h.result("images_step_rss_added_share_of_data", added[large] / data_mb[large], "<=0.25")
    # What does grow: the list of paths, labels, sizes and split indices, per image not per byte.
    per_image = (added[large] - added[small]) * 1024 * 1024 / (large - small)
    h.say(f"  the step's memory grows {per_image:.0f} bytes per image (paths, labels, sizes, split "
          f"order), against {data_mb[large] * 1e6 / large:.0f} bytes per image of data")
    h.result("images_step_rss_bytes_per_image", per_image, "-")
    h.result("images_data_growth_ratio", data_mb[large] / data_mb[small], "-")
    h.result("images_shard_bytes_ratio", shard_ratio, "<=1.05")
    for base in bases.values():
        shutil.rmtree(base / "processing" / "output", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
