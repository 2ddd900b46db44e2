"""PreprocessData: one raw file, or an image tree, -> stratified train/validation/test TFRecord
shards + manifests.

How the pipeline runs it (SageMaker Processing, the TF 2.14 py310 image)::

    PYTHONPATH=/opt/ml/processing/input/code python3 -m processing.preprocess \\
        --instance-count 2 --processes-per-host 4 --seed 42

and locally, with the /opt/ml tree moved::

    SAGEMAKER_BASE_DIR=/tmp/ml python -m processing.preprocess --instance-count 1 --processes-per-host 2

RAW_DATA_DIR holds either one table (a .csv or .npz file) or an image tree
``<class name>/<image>.{jpg,jpeg,png}`` (``processing.images``; never both), or the same
published with its splits (``train/``, ``val/``, ``test/`` folders, ``train.csv``...;
``processing.layout``): given splits are kept, a missing validation/test split is carved
from train. A CSV's label is the --label-column (LabelColumn) in any position; a CSV whose
features are not all numbers, or have gaps, is written as typed columns
(``processing.columns_step``), other tables as float vectors. Each split gets
instance-count x processes-per-host shards (one per Horovod rank of the
training job), equal in size +-1. With several processing instances every host computes the
same split and writes only the shards whose index % hosts is its own; host 0 writes the
manifests. Bad input is refused before anything is written, with one line in
/opt/ml/output/message; outputs are staged beside their directories and moved in at the end.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Collection, Iterator
from contextlib import contextmanager

import numpy as np
import tensorflow as tf

from processing import columns_step, contract, images, tracking
from processing.layout import load_given_tables, split_order
from processing.rawdata import (
    DataError,
    NotNumeric,
    RawData,
    find_raw_file,
    find_split_files,
    load_raw,
)
from processing.split import check_fractions, check_shards_fit, shard_bounds
from training_entry.contract import container_path
from training_entry.failure import report_exit_message
from training_entry.input import examples, records


class SetupError(Exception):
    """The step itself is misconfigured (arguments, host config, output directories)."""


# --- Arguments -------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit(2) without an ExitMessage
        usage = " ".join(self.format_usage().split())  # argparse wraps it over lines
        raise SetupError(f"bad arguments: {message}; {usage}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m processing.preprocess", description=__doc__.splitlines()[0])
    parser.add_argument(contract.ARG_INSTANCE_COUNT, type=int, default=1,
                        help="training instances (shards per split = this x processes per host)")
    parser.add_argument(contract.ARG_PROCESSES_PER_HOST, type=int, default=1,
                        help="Horovod ranks per training instance")
    parser.add_argument(contract.ARG_SEED, type=int, default=contract.DEFAULT_SEED)
    parser.add_argument(contract.ARG_VALIDATION_FRACTION, type=float,
                        default=contract.DEFAULT_VALIDATION_FRACTION)
    parser.add_argument(contract.ARG_TEST_FRACTION, type=float, default=contract.DEFAULT_TEST_FRACTION)
    parser.add_argument(contract.ARG_IMAGE_SIZE, type=int, default=None,
                        help="image trees: the training size (ImageSize); without it images are kept as they are")
    parser.add_argument(contract.ARG_IMAGE_RECORDS, choices=contract.IMAGE_RECORDS,
                        default=contract.DEFAULT_IMAGE_RECORDS,
                        help="image trees: store images larger than the training size resized (default) "
                             "or the original files' bytes")
    parser.add_argument(contract.ARG_LABEL_COLUMN, default=contract.LABEL_COLUMN,
                        help="the CSV column holding the label (LabelColumn), in any position")
    args = parser.parse_args(argv)
    for flag, value, least in ((contract.ARG_INSTANCE_COUNT, args.instance_count, 1),
                               (contract.ARG_PROCESSES_PER_HOST, args.processes_per_host, 1),
                               (contract.ARG_SEED, args.seed, 0)):  # NumPy seeds are >= 0
        if value < least:
            raise SetupError(f"bad arguments: {flag} {value} must be at least {least}")
    check_fractions(args.validation_fraction, args.test_fraction)
    return args


# --- Which processing host am I --------------------------------------------------------------
def host_position(config_path: str) -> tuple[int, int]:
    """(this host's index, number of hosts) from resourceconfig.json; no file = one host."""
    if not os.path.exists(config_path):
        return 0, 1
    try:
        with open(config_path) as f:
            config = json.load(f)
        hosts = list(config["hosts"])  # SageMaker: the same list, in the same order, on every host
        return hosts.index(config["current_host"]), len(hosts)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SetupError(
            f"{config_path} is unreadable or lacks current_host/hosts ({e!r}); the processing "
            f"platform writes it, so check the local runner's host setup"
        ) from None


# --- Writing ---------------------------------------------------------------------------------
def write_shards(
    directory: str,
    split: str,
    x: np.ndarray,
    y: np.ndarray,
    shard_count: int,
    only: Collection[int] | None = None,
) -> dict[str, int]:
    """Write ``x``/``y`` (records in split order) as ``shard_count`` TFRecord shards of
    ``training_entry.input.examples`` Examples in ``directory``, shard i holding the i-th contiguous
    run of records (sizes equal +-1).

    ``only``: the shard indices to write (a processing host writes its own share); None
    writes all. Returns {shard name: record count} for every shard, written or not, which
    is exactly what the split's manifest lists.
    """
    counts = {}
    for index, (start, stop) in enumerate(shard_bounds(len(y), shard_count)):
        name = records.shard_name(split, index, shard_count)
        counts[name] = stop - start
        if only is None or index in only:
            _write_tfrecord(os.path.join(directory, name), x[start:stop], y[start:stop])
    return counts


def _write_tfrecord(path: str, x: np.ndarray, y: np.ndarray) -> None:
    # tf.io.TFRecordWriter over records.write_records: same bytes, and measured faster
    # (50k records: 0.04 s vs 0.07 s with google_crc32c, ~20x that without it). Either way
    # examples.serialize dominates (~0.9 s for those 50k records).
    with tf.io.TFRecordWriter(path) as writer:
        for features, label in zip(x, y, strict=True):
            writer.write(examples.serialize(features, int(label)))


@contextmanager
def staged_outputs(final_dirs: dict[str, str]) -> Iterator[dict[str, str]]:
    """Output name -> a private directory beside its final one (same file system, so the
    move is a rename). On success every file moves into place; on error all is removed, so
    a failed job never leaves half a split for S3 upload or the next step."""
    staged: dict[str, str] = {}
    try:
        for name, final in final_dirs.items():
            parent = os.path.dirname(final.rstrip("/"))
            os.makedirs(parent, exist_ok=True)
            staged[name] = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.partial-", dir=parent)
        yield staged
        for name, final in final_dirs.items():
            os.makedirs(final, exist_ok=True)
            for entry in sorted(os.listdir(staged[name])):
                _move(os.path.join(staged[name], entry), os.path.join(final, entry))
    finally:
        for path in staged.values():
            shutil.rmtree(path, ignore_errors=True)


def _move(source: str, target: str) -> None:
    try:
        os.replace(source, target)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        shutil.move(source, target)  # an output dir mounted from another volume: copy + delete


def check_outputs_empty(final_dirs: dict[str, str]) -> None:
    """SageMaker: the platform creates the output dirs empty. Files already there (a reused
    local tree) would be uploaded next to ours and mix two runs' shards."""
    for final in final_dirs.values():
        if os.path.isdir(final) and os.listdir(final):
            raise SetupError(
                f"output directory {final} is not empty ({len(os.listdir(final))} entries); "
                f"processing writes into empty output directories: clear it or use a fresh /opt/ml tree"
            )


# --- The step --------------------------------------------------------------------------------
def preprocess(args: argparse.Namespace) -> dict[str, dict[str, int]]:
    """Run the step; returns split -> {shard name: records} (all shards, not only this host's)."""
    started = time.perf_counter()
    output_dirs = {name: container_path(path) for name, path in contract.OUTPUT_DIRS.items()}
    host, hosts = host_position(container_path(contract.RESOURCE_CONFIG))
    check_outputs_empty(output_dirs)
    raw_dir = container_path(contract.RAW_DATA_DIR)
    if images.has_images(raw_dir):
        return preprocess_images(args, raw_dir, output_dirs, host, hosts, started)
    files = find_split_files(raw_dir)
    try:
        if files:
            data, given = load_given_tables(files, args.label_column)
        else:
            data, given = load_raw(find_raw_file(raw_dir), args.label_column), None
    except NotNumeric:
        return columns_step.preprocess_columns(args, raw_dir, files, output_dirs, host, hosts, started, staged_outputs)
    shard_count = args.instance_count * args.processes_per_host
    order, origin = split_order(data.y, given, _class_names(data), args, data.path)
    check_shards_fit(
        {split: len(indices) for split, indices in order.items()},
        shard_count,
        f"{contract.ARG_INSTANCE_COUNT} {args.instance_count} x "
        f"{contract.ARG_PROCESSES_PER_HOST} {args.processes_per_host}",
        data.path,
    )
    mine = set(range(host, shard_count, hosts))
    shards: dict[str, dict[str, int]] = {}
    with staged_outputs(output_dirs) as staged:
        for split, indices in order.items():
            shards[split] = write_shards(
                staged[split], split, data.x[indices], data.y[indices], shard_count, only=mine
            )
        if host == 0:  # one writer per manifest: every host would upload the same key
            mean, std = feature_statistics(data.x[order["train"]])
            write_manifests(staged[contract.OUTPUT_MANIFEST], data, shards, mean, std, origin)
    print_summary(data, shards, sorted(mine), host, hosts, time.perf_counter() - started)
    return shards


def preprocess_images(
    args: argparse.Namespace,
    raw_dir: str,
    output_dirs: dict[str, str],
    host: int,
    hosts: int,
    started: float,
) -> dict[str, dict[str, int]]:
    """The image-tree path of the step: list and check the tree, split it, decode every image
    this host writes, and only then write its shards (streaming the files' bytes)."""
    tree = images.list_image_tree(raw_dir)
    shard_count = args.instance_count * args.processes_per_host
    order, origin = split_order(tree.labels, tree.given, tree.class_names, args, raw_dir)
    check_shards_fit(
        {split: len(indices) for split, indices in order.items()},
        shard_count,
        f"{contract.ARG_INSTANCE_COUNT} {args.instance_count} x "
        f"{contract.ARG_PROCESSES_PER_HOST} {args.processes_per_host}",
        raw_dir,
        unit="images",
    )
    mine = set(range(host, shard_count, hosts))
    checked = time.perf_counter()
    sizes = images.check_images(tree, images.indices_of_shards(order, shard_count, mine))
    checked = time.perf_counter() - checked
    shards: dict[str, dict[str, int]] = {}
    side = images.stored_side(args.image_size, args.image_records)
    resized = 0
    with staged_outputs(output_dirs) as staged:
        for split, indices in order.items():
            shards[split], count = images.write_image_shards(
                staged[split], split, tree, indices, sizes, shard_count, only=mine, side=side
            )
            resized += count
        if host == 0:
            for split, counts in shards.items():
                manifest = records.Manifest(
                    split, 0, tree.num_classes, counts,
                    kind=records.KIND_IMAGE, class_names=tree.class_names,
                    origin=origin[split] if origin else None,
                )
                with open(os.path.join(staged[contract.OUTPUT_MANIFEST], records.manifest_name(split)), "w") as f:
                    f.write(manifest.to_json())
    per_split = ", ".join(f"{split} {sum(counts.values())}" for split, counts in shards.items())
    print(
        f"preprocess: {len(tree.paths)} images in {tree.num_classes} classes "
        f"({_clip_names(tree.class_names)}) -> {per_split}; {shard_count} shards per split, "
        f"host {host + 1}/{hosts} decoded {int((sizes[:, 0] > 0).sum())} image(s) in {checked:.2f}s "
        f"and wrote {len(mine)} shard(s) of them "
        + (f"as they are ({contract.ARG_IMAGE_RECORDS} {contract.IMAGE_RECORDS_ORIGINAL})"
           if side is None else
           f"with {resized} image(s) larger than the training size resized to a {side} px short side "
           f"(JPEG q{contract.RESIZED_JPEG_QUALITY}; {contract.ARG_IMAGE_RECORDS} {contract.IMAGE_RECORDS_ORIGINAL} "
           "keeps the files)")
        + f"{' and the manifests' if host == 0 else ''} in {time.perf_counter() - started:.2f}s",
        flush=True,
    )
    return shards


def _class_names(data: RawData) -> tuple[str, ...]:
    return data.class_names or tuple(str(i) for i in range(data.num_classes))


def _clip_names(names: tuple[str, ...], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (f", ... {len(names) - shown} more" if len(names) > shown else "")


def feature_statistics(x: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-feature mean and standard deviation of the train split (float64 sums). A constant
    feature gets std 1, so standardising it gives 0 instead of a division by zero."""
    values = np.asarray(x, dtype=np.float64)
    std = values.std(axis=0)
    std[std == 0] = 1.0
    return tuple(values.mean(axis=0).tolist()), tuple(std.tolist())


def write_manifests(
    directory: str,
    data: RawData,
    shards: dict[str, dict[str, int]],
    feature_mean: tuple[float, ...],
    feature_std: tuple[float, ...],
    origin: dict[str, str] | None = None,
) -> None:
    for split, counts in shards.items():
        manifest = records.Manifest(
            split, data.num_features, data.num_classes, counts, feature_mean, feature_std,
            class_names=data.class_names, origin=origin[split] if origin else None,
            label_column=data.label_column,
        )
        with open(os.path.join(directory, records.manifest_name(split)), "w") as f:
            f.write(manifest.to_json())


def print_summary(
    data: RawData,
    shards: dict[str, dict[str, int]],
    mine: list[int],
    host: int,
    hosts: int,
    seconds: float,
) -> None:
    per_split = ", ".join(f"{split} {sum(counts.values())}" for split, counts in shards.items())
    shard_count = len(next(iter(shards.values())))
    print(
        f"preprocess: {len(data.y)} records from {os.path.basename(data.path)} "
        f"({data.num_features} features, {data.num_classes} classes) -> {per_split}; "
        f"{shard_count} shards per split, host {host + 1}/{hosts} wrote {len(mine)} of them"
        f"{' and the manifests' if host == 0 else ''} in {seconds:.2f}s",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    try:
        preprocess(parse_args(argv))
    except (DataError, SetupError) as e:
        report_exit_message("preprocess", str(e))
        return 1
    except Exception as e:
        traceback.print_exc()
        report_exit_message("preprocess", f"unexpected error in preprocess: {type(e).__name__}: {e}")
        return 1
    # MLflow, on SageMaker with `definition --tracking-uri`: never fails the step.
    tracking.log_data_summary()
    return 0


if __name__ == "__main__":
    sys.exit(main())
