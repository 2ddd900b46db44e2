"""Images per second one core decodes and augments from a run's own image records: the
training path's map (``images.parse_example``, training=True) on one thread, the records' bytes
already in memory, so what is timed is decode + resize + augment alone. ``trainpipe advise``
multiplies it by the cores a GPU instance gives each GPU (its input ceiling).

A table's records (``--manifest``: its train manifest, float vectors or typed columns): rows
per second one core parses, in the training path's blocks (``datasets._block_parser``: one
parse per ``TABLE_BLOCK`` records), reported under the same key.

    python -m training_entry.input.rate --image-size 224 --augmentation crop_flip SHARD [SHARD ...]
    python -m training_entry.input.rate --manifest train.json SHARD [SHARD ...]
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
TABLE_BLOCK = 1024  # records per parse, as the training path's blocks of batches


def _one_core_options():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1  # one core's work, no autotuned pool
    options.threading.max_intra_op_parallelism = 1
    return options


def measure(shards: list[str], image_size: int, augmentation: str, seconds: float) -> dict:
    import tensorflow as tf

    options = _one_core_options()  # before anything initialises TensorFlow's runtime
    from training_entry.input import images

    pipeline = (
        tf.data.TFRecordDataset(shards).cache().repeat()
        .map(lambda r: images.parse_example(r, image_size, True, augmentation), num_parallel_calls=1)
        .batch(BATCH).with_options(options)
    )
    return _timed(iter(pipeline), BATCH, seconds)


def measure_table(shards: list[str], manifest: dict, seconds: float) -> dict:
    import tensorflow as tf

    options = _one_core_options()  # before anything initialises TensorFlow's runtime
    from training_entry.input import examples, typed_examples

    columns = manifest.get("columns")
    num_features = int(manifest.get("num_features") or 0)
    parse = ((lambda block: typed_examples.parse_batch(block, columns)) if columns
             else (lambda block: examples.parse_batch(block, num_features)))
    pipeline = (tf.data.TFRecordDataset(shards).cache().repeat().batch(TABLE_BLOCK)
                .map(parse, num_parallel_calls=1).with_options(options))
    return _timed(iter(pipeline), TABLE_BLOCK, seconds)


def _timed(iterator, per_batch: int, seconds: float) -> dict:
    for _ in range(2):  # the cache filled, the map traced
        next(iterator)
    best, total = 0.0, 0
    for _ in range(3):
        # Per CPU second of this process (one thread works): a core of its own, whatever else
        # a shared machine runs meanwhile (wall time there would count the others' turns).
        started, cpu, done = time.perf_counter(), time.process_time(), 0
        while time.perf_counter() - started < seconds / 3:
            next(iterator)
            done += per_batch
        best = max(best, done / max(time.process_time() - cpu, 1e-9))
        total += done
    return {"images_per_s_per_core": best, "images": total, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="training_entry.input.rate", description=__doc__.splitlines()[0])
    parser.add_argument("shards", nargs="+")
    parser.add_argument("--image-size", type=int, help="an image run's training size")
    parser.add_argument("--manifest", help="a table run's train manifest (JSON): its records are parsed, not decoded")
    parser.add_argument("--augmentation", default="crop_flip")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.manifest:
        with open(args.manifest) as f:
            found = measure_table(args.shards, json.load(f), args.seconds)
    elif args.image_size:
        found = measure(args.shards, args.image_size, args.augmentation, args.seconds)
    else:
        parser.error("--image-size (image records) or --manifest (table records) is required")
    print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
