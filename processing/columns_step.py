"""The typed-columns path of PreprocessData: a CSV whose features are not all numbers (or
that has missing values) -> shards of raw typed values + manifests carrying the schema and the
train split's statistics and vocabularies (``processing.columns``).

Streams the file (three passes: types and labels, train statistics, records); nothing held
grows with a row's width. Held in memory: per row its class id, split, position and this
host's spill offsets (about 64 bytes a row measured: 64 MB above the step's start for
1,000,000 rows, ``benchmarks/input/tables.py``), plus up to ``columns.MAX_TRACKED`` distinct values
per categorical column. So the limit is rows, not bytes: ~15 million rows per GB of memory. Records are serialized in file
order into a spill file per shard beside the outputs, then copied into each shard in the
split's shuffled order (so disk holds this host's shards twice, briefly).
Python 3.10 syntax (SageMaker's TF 2.14 py310 image).
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np
import tensorflow as tf

from processing import columns, contract
from processing.layout import split_order
from processing.rawdata import DataError, find_raw_file, label_classes, label_index, read_header
from processing.split import SPLITS, check_shards_fit, shard_bounds
from training_entry.input import records, typed_examples


def preprocess_columns(args, raw_dir, files, output_dirs, host, hosts, started, staged_outputs):
    """Run the step on typed columns; returns split -> {shard name: records}."""
    paths = [files[s] for s in SPLITS if s in files] if files else [find_raw_file(raw_dir)]
    scans = _scan_all(paths, args.label_column)
    first = scans[0]
    class_names, y = _union_classes(scans)
    given, start = {}, 0
    for split, scan in zip([s for s in SPLITS if s in files] if files else [None], scans, strict=True):
        if split:
            given[split] = np.arange(start, start + len(scan.y))
        start += len(scan.y)
    order, origin = split_order(y, given or None, class_names, args, first.path)
    shard_count = args.instance_count * args.processes_per_host
    check_shards_fit({s: len(i) for s, i in order.items()}, shard_count,
                     f"{contract.ARG_INSTANCE_COUNT} {args.instance_count} x "
                     f"{contract.ARG_PROCESSES_PER_HOST} {args.processes_per_host}", first.path)
    is_train = np.zeros(len(y), dtype=bool)
    is_train[order["train"]] = True
    schema, notes = _train_schema(scans, is_train)
    for note in notes:
        print(note, flush=True)
    mine = set(range(host, shard_count, hosts))
    with staged_outputs(output_dirs) as staged:
        shards = _write(scans, schema, y, order, shard_count, mine, staged)
        if host == 0:
            for split, counts in shards.items():
                manifest = records.Manifest(
                    split, sum(1 for c in schema if not c.get("dropped")), len(class_names), counts,
                    class_names=class_names, origin=origin[split] if origin else None,
                    label_column=args.label_column, columns=tuple(schema),
                )
                with open(os.path.join(staged[contract.OUTPUT_MANIFEST], records.manifest_name(split)), "w") as f:
                    f.write(manifest.to_json())
    kinds = {kind: sum(1 for c in schema if c["type"] == kind and not c.get("dropped"))
             for kind in (columns.NUMERIC, columns.CATEGORICAL, columns.HASHED)}
    print(
        f"preprocess: {len(y)} records from {', '.join(os.path.basename(p) for p in paths)} "
        f"({kinds[columns.NUMERIC]} numeric, {kinds[columns.CATEGORICAL]} categorical, "
        f"{kinds[columns.HASHED]} hashed column(s); label '{args.label_column}', {len(class_names)} classes) -> "
        + ", ".join(f"{s} {sum(c.values())}" for s, c in shards.items())
        + f"; {shard_count} shards per split, host {host + 1}/{hosts} wrote {len(mine)} of them"
        f"{' and the manifests' if host == 0 else ''} in {time.perf_counter() - started:.2f}s",
        flush=True,
    )
    return shards


def _scan_all(paths: list[str], label_column: str) -> list[columns.Scan]:
    scans = []
    for path in paths:
        header = read_header(path)
        scan = columns.scan(path, header, label_index(path, header, label_column), min_classes=1 if len(paths) > 1 else 2)
        if scans and header != scans[0].header:
            raise DataError(
                f"{path} has columns {','.join(header)[:200]} but {scans[0].path} has "
                f"{','.join(scans[0].header)[:200]}; every split's table needs the same header"
            )
        scans.append(scan)
    # A column is numeric only if it is numeric in every split's file.
    for i in range(len(scans[0].header)):
        numeric = all(s.numeric[i] for s in scans)
        for s in scans:
            s.numeric[i] = numeric
    return scans


def _union_classes(scans: list[columns.Scan]) -> tuple[tuple[str, ...], np.ndarray]:
    """The classes of every file (sorted as ``label_classes`` sorts them) and every kept row's
    class id. Mapped per distinct name, not per row: a row costs its 8-byte id, nothing more."""
    per_file = [s.class_names or tuple(str(i) for i in range(int(s.y.max()) + 1)) for s in scans]
    distinct = sorted({name for names in per_file for name in names})
    union, _ = label_classes(scans[0].path, scans[0].header[scans[0].label_index], np.array(distinct))
    union = union or tuple(str(i) for i in range(len(distinct)))
    position = {name: i for i, name in enumerate(union)}
    y = np.concatenate([np.array([position[n] for n in names], np.int64)[s.y] for names, s in zip(per_file, scans, strict=True)])
    return union, y


def _train_schema(scans: list[columns.Scan], is_train: np.ndarray) -> tuple[list[dict], list[str]]:
    """The schema from the train rows of every file (given splits: the train file's)."""
    start, merged = 0, None
    for scan in scans:
        mask = is_train[start : start + len(scan.y)]
        start += len(scan.y)
        if mask.any():
            if merged is not None:  # pragma: no cover - train rows come from one file
                raise DataError(f"{scan.path}: train rows in two files")
            merged = columns.train_statistics(scan, mask)
    return merged


def _write(scans, schema, y, order, shard_count, mine, staged) -> dict[str, dict[str, int]]:
    """Every shard of ``mine`` written in its split's order; returns all shards' counts."""
    split_of = np.empty(len(y), dtype=np.int8)
    position = np.empty(len(y), dtype=np.int64)
    counts: dict[str, dict[str, int]] = {}
    starts: dict[str, np.ndarray] = {}
    for s_index, split in enumerate(SPLITS):
        split_of[order[split]] = s_index
        position[order[split]] = np.arange(len(order[split]))
        bounds = shard_bounds(len(order[split]), shard_count)
        starts[split] = np.array([b[0] for b in bounds])
        counts[split] = {records.shard_name(split, i, shard_count): stop - begin
                         for i, (begin, stop) in enumerate(bounds)}
    spills = {}
    with contextlib.ExitStack() as stack:
        for s_index, split in enumerate(SPLITS):
            for shard in mine:
                size = list(counts[split].values())[shard]
                path = os.path.join(staged[split], f".spill-{shard}")
                stack.callback(_remove, path)
                spill = stack.enter_context(open(path, "w+b"))
                spills[(s_index, shard)] = (spill, np.zeros(size, np.int64), np.zeros(size, np.int64))
        encode = typed_examples.Encoder(schema)
        row_index = 0
        for scan in scans:
            for _, row in columns.rows(scan.path, len(scan.header)):
                if columns.missing(row[scan.label_index]):
                    continue
                s_index, pos = int(split_of[row_index]), int(position[row_index])
                shard = int(np.searchsorted(starts[SPLITS[s_index]], pos, side="right")) - 1
                spill = spills.get((s_index, shard))
                if spill is not None:
                    payload = encode(row[:scan.label_index] + row[scan.label_index + 1:], int(y[row_index]))
                    at = pos - int(starts[SPLITS[s_index]][shard])
                    spill[1][at], spill[2][at] = spill[0].tell(), len(payload)
                    spill[0].write(payload)
                row_index += 1
        for (s_index, shard), (f, offsets, lengths) in spills.items():
            split = SPLITS[s_index]
            f.flush()
            _copy_in_order(f, offsets, lengths, os.path.join(staged[split], records.shard_name(split, shard, shard_count)))
    return counts


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


def _copy_in_order(spill, offsets: np.ndarray, lengths: np.ndarray, target: str) -> None:
    # pread per record, not an mmap of the spill: mapped pages would count in the step's RSS.
    fd = spill.fileno()
    with tf.io.TFRecordWriter(target) as writer:
        for offset, length in zip(offsets.tolist(), lengths.tolist(), strict=True):
            writer.write(os.pread(fd, length, offset))
