"""P2: the Pipe-mode reader fed by the local runner's feeder vs TFRecordDataset on the same shards.

The same training shards (digits x N, written by ``processing.preprocess``) reach one rank
two ways, each measured as what the entrypoint hands Keras, ``datasets.training_dataset`` (one
pass: shuffle, batch, parse), drained in-graph so no Python loop is timed:

- File: ``tf.data.TFRecordDataset`` on the shards on disk (the entrypoint's File/FastFile
  reader).
- Pipe: ``pipeline.local.store.channels.PipeFeeder`` streams the shards into the FIFO
  ``train_0`` (as for a job) and the entrypoint's ``PipeReader`` reads it
  (``pipe.read_epoch_chunks``: lists of records, shuffled and batched by
  ``pipe_batches`` and handed to tf.data as one blob per ~1024 records), with
  the reader the install built (the native module ``_trainpipe_records``: framing and CRC32C
  in C, a buffer per call) and, as a reference, with the Python fallback reader.

Below those, the readers alone: records/s and MB/s of the raw record stream (Pipe: the
Python generator; File: TFRecordDataset drained in-graph), to show where the Pipe path
spends its time. Then the File channel end to end at the same size: the runner's staging
(``channels.stage_files`` from the local object store) plus the read, against Pipe, which
needs no staging.

    .venv/bin/python -m benchmarks.input.p2_pipe_reader [--replicate 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time

from benchmarks import harness as h


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.input.p2_pipe_reader", description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=16, help="digits copies (1797 records each)")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-staging", action="store_true", help="skip the File channel with staging")
    args = parser.parse_args(argv)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from pipeline.local.store import channels as ch
    from pipeline.local.store.storage import LocalStorage
    from training_entry.config import Channel, Hosts
    from training_entry.input import datasets, pipe, records
    from training_entry.input.context import InputContext
    from training_entry.input.plan import Layout, plan_channel

    work = h.work_dir("p2")
    splits = h.preprocess(work, args.replicate, args.shards)
    train_dir = splits["train"]
    shards = sorted(p for p in train_dir.iterdir() if records.is_shard_name(p.name))
    manifest = records.Manifest.load(str(splits["manifest"] / "train.json"))
    total = manifest.total_records
    size_mb = sum(p.stat().st_size for p in shards) / 1e6
    hosts = Hosts("algo-1", ("algo-1",))
    layout = Layout(host_index=0, host_count=1, local_rank=0, local_size=1)
    fifo_dir = work / "fifo"
    file_channel = Channel("train", "File", "ShardedByS3Key", str(train_dir))
    pipe_channel = Channel("train", "Pipe", "ShardedByS3Key", str(fifo_dir / "train"))
    file_plan = plan_channel(file_channel, manifest, layout, args.batch)
    pipe_plan = plan_channel(pipe_channel, manifest, layout, args.batch)
    quota = file_plan.quota  # records one pass hands Keras (whole batches)

    def context() -> InputContext:
        return InputContext(hosts=hosts, fifo_dir=str(fifo_dir), config_dir=str(work),
                            private_dir=str(work / "private"),
                            num_features=manifest.num_features, seed=1)

    def drain_batches(ds) -> int:
        # In-graph: no Python per batch, as when Keras pulls the dataset.
        return int(ds.reduce(tf.constant(0, tf.int64),
                             lambda n, batch: n + tf.cast(tf.shape(batch[1])[0], tf.int64)))

    class Feeding:
        """One PipeFeeder serving pass 0 of the channel, as the runner starts it per host."""

        def __enter__(self):
            shutil.rmtree(fifo_dir, ignore_errors=True)
            fifo_dir.mkdir(parents=True)
            self.stop = threading.Event()
            channel = ch.Channel(name="train", uri="s3://bench/train/", input_mode=ch.PIPE,
                                 distribution=ch.SHARDED)
            self.feeder = ch.PipeFeeder(fifo_dir, channel, shards, self.stop)
            self.feeder.start()
            return self

        def __exit__(self, *exc):
            self.stop.set()
            self.feeder.join(5)
            shutil.rmtree(fifo_dir, ignore_errors=True)

    def file_dataset() -> float:
        started = time.perf_counter()
        ds = datasets.training_dataset(file_plan, context(), 1).take(file_plan.steps)
        got = drain_batches(ds)
        assert got == quota, (got, quota)
        return got / (time.perf_counter() - started)

    def pipe_dataset() -> float:
        with Feeding():
            started = time.perf_counter()
            got = drain_batches(datasets.training_dataset(pipe_plan, context(), 1))
            seconds = time.perf_counter() - started
        assert got == quota, (got, quota)
        return got / seconds

    def pipe_dataset_python() -> float:
        native, records.native = records.native, None
        try:
            return pipe_dataset()
        finally:
            records.native = native

    def file_raw() -> float:
        started = time.perf_counter()
        ds = tf.data.TFRecordDataset([str(p) for p in shards], buffer_size=1 << 20)
        # Counted per 1024 records: a reduce step per record would cost more than the read.
        got = int(ds.batch(1024).reduce(tf.constant(0, tf.int64),
                                        lambda n, b: n + tf.cast(tf.size(b), tf.int64)))
        assert got == total, (got, total)
        return got / (time.perf_counter() - started)

    def pipe_raw() -> float:
        with Feeding():
            started = time.perf_counter()
            got = sum(len(c) for c in pipe.read_epoch_chunks(str(fifo_dir / "train_0"), total))
            seconds = time.perf_counter() - started
        assert got == total, (got, total)
        return got / seconds

    h.say(f"P2 pipe reader: {total} training records (digits x {args.replicate}) in "
          f"{len(shards)} shards, {size_mb:.1f} MB; batch {args.batch}; {args.repeats} "
          f"interleaved repetitions; Pipe reader: {records.reader_implementation()}")
    if records.native is None:
        h.say(f"  (the native reader is not installed: {records.NATIVE_MODULE} does not import; "
              f"scripts/install.sh builds it)")
    candidates = {"file_dataset": file_dataset, "pipe_dataset": pipe_dataset,
                  "pipe_dataset_python": pipe_dataset_python, "file_raw": file_raw, "pipe_raw": pipe_raw}
    # One untimed call of each first: the first pass of a process traces tf.data's functions
    # and reads the shards into the page cache, and ran at about half speed (whichever
    # candidate it fell on), a quarter of a 4-repetition median.
    for warm_up in candidates.values():
        warm_up()
    runs = h.interleave(candidates, args.repeats)
    mb_per_record = size_mb / total
    for name, what in (("file_dataset", "File: TFRecordDataset -> training_dataset"),
                       ("pipe_dataset", "Pipe: feeder -> FIFO -> PipeReader -> training_dataset"),
                       ("pipe_dataset_python", "  the same with the Python fallback reader"),
                       ("file_raw", "File: TFRecordDataset records alone"),
                       ("pipe_raw", "Pipe: feeder -> FIFO -> pipe.read_epoch_chunks alone")):
        value = h.median(runs[name])
        h.say(f"  {what:58s} {h.spread(runs[name]):36s} records/s  {value * mb_per_record:7.1f} MB/s")
    ratio = h.median(runs["pipe_dataset"]) / h.median(runs["file_dataset"])
    python_ratio = h.median(runs["pipe_dataset_python"]) / h.median(runs["file_dataset"])
    raw_ratio = h.median(runs["pipe_raw"]) / h.median(runs["file_raw"])
    h.say(f"  ratio Pipe/File as training input: {ratio:.3f} (Python fallback reader: "
          f"{python_ratio:.3f}); readers alone: {raw_ratio:.3f}")

    h.save_figures(f"p2-x{args.replicate}", {
        "records": quota, **{name: h.median(values) for name, values in runs.items()}})
    if args.no_staging:
        h.result("p2_pipe_vs_file_ratio", ratio, 0.9)
        h.result("p2_python_reader_vs_file_ratio", python_ratio, "-")
        return 0
    # The File channel end to end: the runner copies the objects in first.
    store = LocalStorage(work / "store")
    for shard in shards:
        store.put_file(shard, f"s3://bench/train/{shard.name}")
    objects = ch.list_objects(store, "s3://bench/train/", "channel 'train'")

    def file_channel_end_to_end() -> float:
        target = work / "staged" / "train"
        shutil.rmtree(target.parent, ignore_errors=True)
        started = time.perf_counter()
        ch.stage_files(store, objects, target, ch.FILE)
        plan = plan_channel(Channel("train", "File", "ShardedByS3Key", str(target)),
                                 manifest, layout, args.batch)
        got = drain_batches(datasets.training_dataset(plan, context(), 1).take(plan.steps))
        return got / (time.perf_counter() - started)

    end_to_end = h.interleave({"file_channel": file_channel_end_to_end, "pipe_dataset": pipe_dataset},
                              args.repeats)
    staged = h.median(end_to_end["file_channel"])
    streamed = h.median(end_to_end["pipe_dataset"])
    h.say(f"  File channel incl. staging (copy {size_mb:.1f} MB, then read): {h.spread(end_to_end['file_channel'])} "
          f"records/s; Pipe {h.spread(end_to_end['pipe_dataset'])}; Pipe/File {streamed / staged:.3f}")
    h.result("p2_pipe_vs_file_ratio", ratio, 0.9)
    h.result("p2_python_reader_vs_file_ratio", python_ratio, "-")
    h.result("p2_pipe_records_per_s", h.median(runs["pipe_dataset"]), "-")
    h.result("p2_pipe_mb_per_s", h.median(runs["pipe_dataset"]) * mb_per_record, "-")
    h.result("p2_file_records_per_s", h.median(runs["file_dataset"]), "-")
    h.result("p2_reader_alone_ratio", raw_ratio, "-")
    h.result("p2_pipe_vs_file_channel_with_staging", streamed / staged, "-")
    shutil.rmtree(work / "store", ignore_errors=True)
    shutil.rmtree(work / "staged", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
