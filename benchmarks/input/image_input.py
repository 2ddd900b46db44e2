"""Image input pipeline: images/s that decode + resize + augment deliver (the training
path's tf.data map, ``training_entry.input.images.parse_example``) against the images/s the
small_cnn training step consumes, under the same thread budget.

The input must outpace the step, or the step waits on it. Both run in this one process with
``--threads`` TF threads (1: what ``pipeline.local.hosts.launch_settings`` gives each of two local ranks on
two cores), on the digits PNG shards that PreprocessData writes; repetitions are
interleaved (input, step, input, step, ...) so load drift hits both alike.

    .venv/bin/python -m benchmarks.input.image_input [--threads 1] [--image-size 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks import harness as h

BATCH = 32


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.input.image_input", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="TF intra/inter-op and tf.data threads")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=60, help="batches per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from training_entry.input import images, records
    from training_entry.model import architectures

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    splits = h.preprocess_images(h.work_dir("image_input"), 1)
    shards = sorted(str(p) for p in splits["train"].iterdir() if records.is_shard_name(p.name))
    size = args.image_size

    options = tf.data.Options()
    options.threading.private_threadpool_size = args.threads
    pipeline = (
        tf.data.TFRecordDataset(shards).cache().repeat()  # the bytes in memory: decode is measured
        .map(lambda r: images.parse_example(r, size, True, "crop_flip"),
             num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE).with_options(options)
    )
    iterator = iter(pipeline)
    sample_x, sample_y = next(iterator)

    model = architectures.small_cnn(size, 10)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.001),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.train_on_batch(sample_x, sample_y)  # traces the step

    def input_rate() -> float:
        started = time.perf_counter()
        for _ in range(args.batches):
            next(iterator)
        return args.batches * BATCH / (time.perf_counter() - started)

    def step_rate() -> float:
        started = time.perf_counter()
        for _ in range(args.batches):
            model.train_on_batch(sample_x, sample_y)
        return args.batches * BATCH / (time.perf_counter() - started)

    input_rate()  # warm the cache and the map's autotuner
    h.say(f"image input vs training step: digits PNGs -> {size}x{size}, batch {BATCH}, "
          f"{args.threads} thread(s), {args.repeats} interleaved repetitions (machine may be shared)")
    rates = h.interleave({"input (decode + augment)": input_rate, "small_cnn step": step_rate}, args.repeats)
    supply = h.median(rates["input (decode + augment)"])
    demand = h.median(rates["small_cnn step"])
    for name, values in rates.items():
        h.say(f"  {name:28s} {h.spread(values)} images/s")
    h.say(f"  input / step demand: {supply / demand:.2f} (above 1: the step never waits on the input)")
    h.result("image_input_images_per_s", supply, "-")
    h.result("image_step_demand_images_per_s", demand, "-")
    h.result("image_input_vs_step", supply / demand, 1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
