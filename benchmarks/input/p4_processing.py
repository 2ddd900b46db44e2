"""P4: PreprocessData's shard writer vs a plain ``tf.io.TFRecordWriter`` loop.

Both write the same records (digits x N, serialized with ``training_entry.input.examples.serialize``,
the one encoding the project uses); the plain loop writes them into a single file, the way
anyone would without shards. ``processing.preprocess.write_shards`` writes them as
``--shards`` files of contiguous runs. The ratio (shard writer records/s over the plain
loop's) says what sharding costs; the size check says the shards are equal to +-1 record.
Serialization alone is timed too, because it, not the writing, is where the time goes.

    .venv/bin/python -m benchmarks.input.p4_processing [--replicate 16] [--shards 8] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from benchmarks import harness as h


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.input.p4_processing", description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=16, help="digits copies (1797 records each)")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from processing.preprocess import write_shards
    from training_entry.input import examples, records

    x, y = h.digits_arrays(args.replicate)
    n = len(y)
    work = h.work_dir("p4")

    def fresh(name: str) -> str:
        path = work / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return str(path)

    def plain_loop() -> float:
        directory = fresh("plain")
        started = time.perf_counter()
        with tf.io.TFRecordWriter(os.path.join(directory, "all.tfrecord")) as writer:
            for features, label in zip(x, y, strict=True):
                writer.write(examples.serialize(features, int(label)))
        return n / (time.perf_counter() - started)

    def sharded() -> float:
        directory = fresh("sharded")
        started = time.perf_counter()
        write_shards(directory, "train", x, y, args.shards)
        return n / (time.perf_counter() - started)

    def serialize_only() -> float:
        started = time.perf_counter()
        for features, label in zip(x, y, strict=True):
            examples.serialize(features, int(label))
        return n / (time.perf_counter() - started)

    h.say(f"P4 processing: {n} records (digits x {args.replicate}), {args.shards} shards, "
          f"{args.repeats} interleaved repetitions")
    runs = h.interleave({"plain": plain_loop, "write_shards": sharded, "serialize": serialize_only},
                        args.repeats)
    # Sizes and bytes of the last sharded write (all writes are identical).
    counts = write_shards(fresh("check"), "train", x, y, args.shards)
    on_disk = {}
    for name in sorted(counts):
        path = work / "check" / name
        on_disk[name] = sum(1 for _ in records.read_file_records(str(path)))
    total_bytes = h.bytes_of(work / "check")
    sizes = sorted(on_disk.values())
    spread = sizes[-1] - sizes[0]
    mb = total_bytes / 1e6
    plain, shards, ser = (h.median(runs[k]) for k in ("plain", "write_shards", "serialize"))
    h.say(f"  plain TFRecordWriter loop : {h.spread(runs['plain'])} records/s, {plain * mb / n:.2f} MB/s")
    h.say(f"  write_shards ({args.shards} files)   : {h.spread(runs['write_shards'])} records/s, "
          f"{shards * mb / n:.2f} MB/s")
    h.say(f"  serialize only            : {h.spread(runs['serialize'])} records/s "
          f"({100 * plain / ser:.0f}% of the plain loop's time is serialization)")
    h.say(f"  shard sizes: {sizes[0]}..{sizes[-1]} records (manifest agrees: "
          f"{on_disk == counts}), {total_bytes} bytes in all")
    ratio = shards / plain
    h.say(f"  ratio write_shards / plain = {ratio:.3f}")
    h.result("p4_shard_write_ratio", ratio, 0.9)
    h.result("p4_shard_write_records_per_s", shards, "-")
    h.result("p4_shard_size_spread_records", spread, "<=1")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if on_disk == counts else 1


if __name__ == "__main__":
    sys.exit(main())
