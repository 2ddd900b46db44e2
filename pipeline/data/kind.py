"""Before any job starts: what InputDataUri holds (a table or an image tree), the shape the
job will see where it can be known without a job (classes, features, training records),
whether ModelArchitecture fits it, and whether the training split fills a batch on every
rank. ``run --local`` lists the local store (or S3), ``start`` lists S3 with boto3; both
through ``pipeline.local.store.storage``'s ``Storage.list``.

What is known when:
- an image tree: everything from the listing (class folders, file counts per class and
  split), so the split sizes are the processing step's own arithmetic, exactly;
- a table in the local store (``run --local``) of at most ``PRECHECK_TABLE_BYTES``: its
  header, and one pass over the label column (rows and classes), in a second or two;
- a larger table, or one in S3 (``start``): nothing more than its kind before processing
  reads it; the training job then refuses a split too small for BatchSize in its first
  seconds, after processing has run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pipeline.data.shape import DataShape
from pipeline.definition import parameters as P
from pipeline.local.store.storage import Storage
from processing.contract import (
    DEFAULT_SEED,
    DEFAULT_TEST_FRACTION,
    DEFAULT_VALIDATION_FRACTION,
    IMAGE_EXTENSIONS,
    RAW_SUFFIXES,
    DataKindError,
    class_of,
    data_kind,
    image_classes,
    image_splits,
    split_of,
    table_splits,
)
from training_entry.contract import ARCH_AUTO, ARCH_CUSTOM, FRAMEWORK_PYTORCH
from training_entry.input.records import KIND_IMAGE

# A local table up to this size is read before any job (header and label column, about a
# second per 30 MB); a larger one is left to the processing step.
PRECHECK_TABLE_BYTES = 32 << 20


def relative_keys(storage: Storage, data_uri: str) -> list[str]:
    prefix = data_uri if data_uri.endswith("/") else data_uri + "/"
    keys = [uri[len(prefix):] for uri in storage.list(prefix)]
    if not keys and not data_uri.endswith("/") and storage.exists(data_uri):
        # SageMaker: an S3Prefix input may name one object (s3://bucket/data/digits.csv), which
        # the processing job receives under its own name.
        keys = [data_uri.rpartition("/")[2]]
    return keys


def check_input_data(storage: Storage, values: Mapping[str, object], has_model_file: bool) -> str:
    """The data's kind (``records.KIND_*``); ParameterError (one line): see ``inspect_input_data``."""
    return inspect_input_data(storage, values, has_model_file).kind


def inspect_input_data(storage: Storage, values: Mapping[str, object], has_model_file: bool,
                       tuning: bool = False) -> DataShape:
    """The data's shape; ParameterError (one line) for data that is no table and no image
    tree, an architecture that does not fit it, or a training split that cannot fill one
    batch of BatchSize on every rank (``tuning``: of the smallest batch size --tune tries; the
    tuning step clips the range's top to the data, local/jobs/tuning/data_fit.py)."""
    data_uri = str(values[P.INPUT_DATA_URI])
    keys = relative_keys(storage, data_uri)
    try:
        kind = data_kind(keys)
    except DataKindError as error:
        raise P.ParameterError(f"{P.INPUT_DATA_URI}={data_uri}: {error}") from None
    P.check_architecture(values, kind, has_model_file)
    if kind == KIND_IMAGE:
        shape = image_shape(keys)
    else:
        user_model = has_model_file and values.get(P.MODEL_ARCHITECTURE, ARCH_AUTO) in (ARCH_AUTO, ARCH_CUSTOM)
        pytorch = values.get(P.FRAMEWORK) == FRAMEWORK_PYTORCH
        shape = table_shape(storage, data_uri, keys, str(values.get(P.LABEL_COLUMN) or "label"),
                            user_model or pytorch)
        if pytorch and shape.typed:
            # The PyTorch entrypoint reads a float vector (training_torch/train.py refuses the
            # typed manifest), so say it here, before processing runs.
            raise P.ParameterError(
                f"{P.FRAMEWORK}={FRAMEWORK_PYTORCH}: the table under {P.INPUT_DATA_URI}={data_uri} has categorical "
                f"columns or missing values, which train as typed columns encoded inside the model, and the "
                f"PyTorch entrypoint reads only numbers; build without -p {P.FRAMEWORK}={FRAMEWORK_PYTORCH} "
                f"(TensorFlow's mlp takes them), or give it a table of numbers with no gaps"
            )
        if user_model and shape.typed:
            raise P.ParameterError(
                f"--model-file: the table under {P.INPUT_DATA_URI}={data_uri} has categorical columns or "
                f"missing values, which train as typed columns encoded inside the model "
                f"({P.MODEL_ARCHITECTURE}=mlp), and a model file takes a float vector; use -p "
                f"{P.MODEL_ARCHITECTURE}=mlp, or give the file a table of numbers with no gaps"
            )
    if tuning:
        from pipeline.definition.steps.tune import TUNED

        values = {**values, P.BATCH_SIZE: TUNED[P.BATCH_SIZE].min_value}
    check_training_fits(values, shape, tuning)
    return shape


def image_shape(keys: list[str]) -> DataShape:
    """Classes and training records of an image tree, from its listing alone."""
    images = [parts for parts in (_parts(key) for key in keys)
              if parts and os.path.splitext(parts[-1])[1].lower() in IMAGE_EXTENSIONS]
    given = image_splits(images)
    names = image_classes(keys)
    ids = {name: i for i, name in enumerate(names)}
    labels = [ids[class_of("/".join(parts), given)] for parts in images]
    splits = {}
    if given:
        for index, parts in enumerate(images):
            splits.setdefault(split_of(parts[0]), []).append(index)
    where = f"{len(images)} image(s) in {len(names)} class folder(s)"
    return DataShape(KIND_IMAGE, names, None, train_records(labels, splits, names), where)


def table_shape(storage: Storage, data_uri: str, keys: list[str], label_column: str,
                typed_check: bool = False) -> DataShape:
    """A local table's classes, features and training records when it is small enough to
    read now; otherwise only its kind. ``typed_check``: also whether it has typed columns (a
    look at every cell, made only where a model file would meet them)."""
    from processing.rawdata import DataError, NotNumeric, label_classes

    tables = [parts for parts in (_parts(key) for key in keys)
              if parts and os.path.splitext(parts[-1])[1].lower() in RAW_SUFFIXES]
    by_split = table_splits(tables) or {"train": "/".join(tables[0])}
    unknown = DataShape("table")
    read: dict[str, tuple[int, list[str], bool | None]] = {}
    for split, key in by_split.items():
        # (or InputDataUri names the one object: relative_keys)
        uri = data_uri.rstrip("/") + "/" + key
        path = storage.local_path(uri)
        if path is None:
            uri, path = data_uri, storage.local_path(data_uri)
        if path is None:
            return unknown
        _check_label_column(path, uri, label_column)
        if path.stat().st_size > PRECHECK_TABLE_BYTES:
            return unknown
        try:
            read[split] = _read_labels(str(path), label_column, typed_check)
        except (DataError, NotNumeric, OSError, ValueError, KeyError):
            return unknown  # the processing step reads it and says what is wrong, in its words
    features = {f for f, _, _ in read.values()}
    if len(features) != 1:
        return unknown
    every = [label for _, labels, _ in read.values() for label in labels]
    try:
        import numpy as np

        names, y = label_classes(data_uri, label_column, np.asarray(every, dtype=str))
    except DataError:
        return unknown
    if names is None:
        names = tuple(str(i) for i in range(int(y.max()) + 1))
    splits, start = {}, 0
    for split, (_, labels, _) in read.items():
        splits[split] = list(range(start, start + len(labels)))
        start += len(labels)
    if len(read) == 1:
        splits = {}  # one table without split names: the processing step splits it
    where = f"{len(every)} row(s) with a {label_column!r} ({len(names)} classes)"
    typed = any(t for _, _, t in read.values()) if typed_check else None
    return DataShape("table", names, features.pop(), train_records(y.tolist(), splits, names), where, typed)


def _check_label_column(path, uri: str, label_column: str) -> None:
    """A CSV whose header lacks the label column: refused now, naming its URI (the
    processing job would name its /opt/ml/... copy, after starting)."""
    from processing.rawdata import DataError, label_index, read_header

    if not str(path).lower().endswith(".csv"):
        return
    try:
        header = read_header(str(path))
    except DataError:
        return  # unreadable: the processing step says how, in its words
    try:
        label_index(uri, header, label_column)
    except DataError as error:
        raise P.ParameterError(f"{P.INPUT_DATA_URI}: {error}") from None


def _read_labels(path: str, label_column: str, typed_check: bool = False) -> tuple[int, list[str], bool | None]:
    """(feature columns, the label of every row that has one, whether a feature cell is
    missing or not a number: processing's typed columns; None unless ``typed_check``) of a
    CSV or NPZ table."""
    from processing import columns, rawdata

    if path.lower().endswith(".npz"):
        data = rawdata.load_raw(path)
        return int(data.x.shape[1]), [str(v) for v in data.y.tolist()], False if typed_check else None
    header = rawdata.read_header(path)
    index = rawdata.label_index(path, header, label_column)
    labels, typed = [], False if typed_check else None
    for _, row in columns.rows(path, len(header)):
        if not columns.missing(row[index]):
            labels.append(row[index].strip())
        if typed is False:
            typed = any(i != index and not _is_number(cell) for i, cell in enumerate(row))
    return len(header) - 1, labels, typed


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return cell.strip().lower() != "nan"  # NaN is missing, as processing reads it


def train_records(labels: list[int], given: Mapping[str, list[int]], class_names: tuple[str, ...]) -> int | None:
    """Records of the train split, by the processing step's own split (``processing.split``:
    its sizes do not depend on the seed); None when processing would refuse the data (it
    says why, in its words)."""
    import numpy as np

    from processing.rawdata import DataError
    from processing.split import TRAIN, given_split, stratified_split

    y = np.asarray(labels, dtype=np.int64)
    try:
        if given:
            order, _ = given_split(y, {s: np.asarray(i, dtype=np.int64) for s, i in given.items()}, class_names,
                                   DEFAULT_VALIDATION_FRACTION, DEFAULT_TEST_FRACTION, DEFAULT_SEED)
        else:
            order = stratified_split(y, DEFAULT_VALIDATION_FRACTION, DEFAULT_TEST_FRACTION, DEFAULT_SEED)
    except (DataError, ValueError):
        return None
    return len(order[TRAIN])


def check_training_fits(values: Mapping[str, object], shape: DataShape, tuning: bool = False) -> None:
    """Refuse, in one line, a training split whose ranks cannot fill one batch: every
    training step takes a whole batch on every rank (Horovod: the same steps on all)."""
    names = (P.BATCH_SIZE, P.TRAINING_INSTANCE_COUNT, P.PROCESSES_PER_HOST)
    if shape.train_records is None or any(values.get(name) is None for name in names):
        return
    batch, hosts, per_host = (int(values[name]) for name in names)
    train = shape.train_records
    # The processing step writes one shard per rank, equal give or take one record.
    per_rank = train // (hosts * per_host)
    if per_rank >= batch:
        return
    # With --tune the tuning job chooses BatchSize (a -p of it is refused): fewer workers only.
    fixes = [f"-p {P.BATCH_SIZE}={per_rank}"] if per_rank >= 1 and not tuning else []
    if train // (batch * per_host) >= 1:
        fixes.append(f"-p {P.TRAINING_INSTANCE_COUNT}={train // (batch * per_host)}")
    elif train >= batch:
        fixes.append(f"-p {P.TRAINING_INSTANCE_COUNT}=1 -p {P.PROCESSES_PER_HOST}={train // batch}")
    fix = " or ".join(fixes) if fixes else "more training data"
    raise P.ParameterError(
        f"{P.BATCH_SIZE}={batch}{' (the smallest --tune tries)' if tuning else ''} is larger than the "
        f"{per_rank} training records each of the "
        f"{hosts * per_host} ranks ({P.TRAINING_INSTANCE_COUNT} x {P.PROCESSES_PER_HOST} = "
        f"{hosts} x {per_host}) gets: {train} of the {shape.source} under {P.INPUT_DATA_URI}="
        f"{values.get(P.INPUT_DATA_URI)} go to the train split, and every training step takes a "
        f"whole batch on every rank; use {fix}"
    )


def _parts(key: str) -> list[str]:
    """A key's path parts; [] for a hidden entry (a part starting with '.'), which the
    processing step ignores."""
    parts = [p for p in key.strip("/").split("/") if p]
    return [] if any(p.startswith(".") for p in parts) else parts
