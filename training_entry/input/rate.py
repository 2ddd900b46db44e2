"""Images per second one core decodes and augments from a run's own image records: the
training path's map (``images.parse_example``, training=True) on one thread, the records' bytes
already in memory, so what is timed is decode + resize + augment alone. ``trainpipe advise``
multiplies it by the cores a GPU instance gives each GPU (its input ceiling).

    python -m training_entry.input.rate --image-size 224 --augmentation crop_flip SHARD [SHARD ...]
    {"images_per_s_per_core": ..., "images": ..., "seconds": ...}

Images per CPU second of the process, best of three windows of ``--seconds`` / 3 each. Python 3.10 syntax.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

BATCH = 32


def measure(shards: list[str], image_size: int, augmentation: str, seconds: float) -> dict:
    import tensorflow as tf

    from training_entry.input import images

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1  # one core's work, no autotuned pool
    options.threading.max_intra_op_parallelism = 1
    pipeline = (
        tf.data.TFRecordDataset(shards).cache().repeat()
        .map(lambda r: images.parse_example(r, image_size, True, augmentation), num_parallel_calls=1)
        .batch(BATCH).with_options(options)
    )
    iterator = iter(pipeline)
    for _ in range(2):  # the cache filled, the map traced
        next(iterator)
    best, total = 0.0, 0
    for _ in range(3):
        # Per CPU second of this process (one thread works): a core of its own, whatever else
        # a shared machine runs meanwhile (wall time there would count the others' turns).
        started, cpu, done = time.perf_counter(), time.process_time(), 0
        while time.perf_counter() - started < seconds / 3:
            next(iterator)
            done += BATCH
        best = max(best, done / max(time.process_time() - cpu, 1e-9))
        total += done
    return {"images_per_s_per_core": best, "images": total, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="training_entry.input.rate", description=__doc__.splitlines()[0])
    parser.add_argument("shards", nargs="+")
    parser.add_argument("--image-size", type=int, required=True)
    parser.add_argument("--augmentation", default="crop_flip")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    print(json.dumps(measure(args.shards, args.image_size, args.augmentation, args.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
