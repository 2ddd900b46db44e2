"""The tf.data pipelines Keras gets, in File and Pipe mode, without Horovod."""

from __future__ import annotations

import importlib.machinery
import sys
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from tests.training_entry.helpers import PipeFeeder
from training_entry.config import Channel, Hosts
from training_entry.input import (
    datasets,
    examples,
    pipe_batches,
    pipe_source,
    records,
    typed_examples,
)
from training_entry.input.context import SHUFFLE_BUFFER, InputContext
from training_entry.input.plan import DataError, Layout, plan_channel

FEATURES = 3


def _write_split(directory, split, counts):
    """Shard i's records have x = [i, j, 0], y = i % 2: every batch says where it came from."""
    directory.mkdir(parents=True, exist_ok=True)
    shards = {}
    for i, count in enumerate(counts):
        name = records.shard_name(split, i, len(counts))
        records.write_records(str(directory / name), [examples.serialize([i, j, 0], i % 2) for j in range(count)])
        shards[name] = count
    return records.Manifest(split, FEATURES, 2, shards)


ONE_HOST = Hosts("algo-1", ("algo-1",))


def _context(tmp_path, hosts=ONE_HOST):
    return InputContext(hosts=hosts, fifo_dir=str(tmp_path / "fifos"), config_dir=str(tmp_path),
                        private_dir=str(tmp_path / "private"), num_features=FEATURES, seed=1)


def _origins(batches):
    return sorted({(int(x[0]), int(y)) for bx, by in batches for x, y in zip(bx.numpy(), by.numpy(), strict=True)})


def test_file_training_never_runs_out_and_reads_only_this_ranks_shards(tmp_path):
    manifest = _write_split(tmp_path / "train", "train", [10, 12, 9, 11])
    channel = Channel("train", "File", "FullyReplicated", str(tmp_path / "train"))
    plan = plan_channel(channel, manifest, Layout(0, 1, 1, 2), batch_size=4)
    assert plan.steps == 4  # rank 0 reads shards 0+2 (19 records), rank 1 shards 1+3 (23)
    batches = list(datasets.training_dataset(plan, _context(tmp_path), epochs=3).take(plan.steps * 10))
    assert len(batches) == plan.steps * 10
    assert batches[0][0].shape == (4, FEATURES) and batches[0][1].dtype == tf.int64
    assert _origins(batches) == [(1, 1), (3, 1)]


def test_file_validation_is_the_same_steps_every_time(tmp_path):
    manifest = _write_split(tmp_path / "validation", "validation", [7, 9])
    channel = Channel("validation", "File", "FullyReplicated", str(tmp_path / "validation"))
    plan = plan_channel(channel, manifest, Layout(0, 1, 0, 2), batch_size=3)
    ds = datasets.validation_dataset(plan, _context(tmp_path))
    first, second = list(ds), list(ds)
    assert len(first) == plan.steps == 3  # ceil(9 / 3): the rank with the most records
    assert [b[0].numpy().tolist() for b in first] == [b[0].numpy().tolist() for b in second]


@pytest.mark.parametrize("counts,batch", [([18, 19], 32), ([7, 9, 8], 3), ([5, 40], 8), ([13, 12], 1)])
def test_file_validation_reads_every_record_once_in_the_same_steps_on_every_rank(tmp_path, counts, batch):
    """A small split (245 photos, 15% validation, 2 ranks: 18 and 19 records) with batch 32:
    partial batches, every record of every rank exactly once, one step count for all."""
    manifest = _write_split(tmp_path / "validation", "validation", counts)
    channel = Channel("validation", "File", "FullyReplicated", str(tmp_path / "validation"))
    seen, steps = [], set()
    for rank in range(len(counts)):
        plan = plan_channel(channel, manifest, Layout(0, 1, rank, len(counts)), batch_size=batch)
        batches = list(datasets.validation_dataset(plan, _context(tmp_path)))
        steps.add(len(batches))
        assert len(batches) == plan.steps
        sizes = [int(b[1].shape[0]) for b in batches]
        assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
        seen += [(int(x[0]), int(x[1])) for bx, _ in batches for x in bx.numpy()]
    assert len(steps) == 1
    assert sorted(seen) == [(i, j) for i, count in enumerate(counts) for j in range(count)]


def test_image_validation_in_partial_batches(tmp_path):
    from pipeline.data.png import encode_png  # a test may build PNGs with the pipeline's encoder

    directory = tmp_path / "validation"
    directory.mkdir()
    name = records.shard_name("validation", 0, 1)
    pngs = [encode_png([bytes([i * 40] * 6)] * 6, 6) for i in range(5)]
    records.write_records(str(directory / name), [
        examples.serialize_image(png, i % 2, "ab"[i % 2], 6, 6) for i, png in enumerate(pngs)])
    manifest = records.Manifest("validation", 0, 2, {name: 5}, kind=records.KIND_IMAGE, class_names=("a", "b"))
    plan = plan_channel(Channel("validation", "File", "FullyReplicated", str(directory)), manifest,
                        Layout(0, 1, 0, 1), batch_size=32)
    ctx = _context(tmp_path)
    ctx.image_size = 4
    (x, y), = list(datasets.validation_dataset(plan, ctx))
    assert x.shape == (5, 4, 4, 3) and sorted(y.numpy().tolist()) == [0, 0, 0, 1, 1]


def test_training_keeps_whole_batches(tmp_path):
    manifest = _write_split(tmp_path / "train", "train", [18, 19])
    channel = Channel("train", "File", "FullyReplicated", str(tmp_path / "train"))
    with pytest.raises(DataError, match="larger than the 18 records"):
        plan_channel(channel, manifest, Layout(0, 1, 0, 2), batch_size=32)


def _pipe_setup(tmp_path, distribution, hosts, layout, counts=(20, 24, 18, 22), batch=4):
    split_dir = tmp_path / "source"
    manifest = _write_split(split_dir, "train", list(counts))
    (tmp_path / "fifos").mkdir()
    channel = Channel("train", "Pipe", distribution, str(tmp_path / "fifos" / "train"))
    plan = plan_channel(channel, manifest, layout, batch)
    objects = [split_dir / name for name, _ in plan.stream]
    return plan, objects


def _train_through_fifos(tmp_path, plan, objects, hosts, epochs, passes=None):
    """Every batch of ``epochs`` epochs of the Pipe training dataset, the feeder offering
    ``passes`` FIFOs (default one per epoch)."""
    feeder = PipeFeeder(tmp_path / "fifos", "train", objects, passes=passes or epochs).start()
    try:
        return list(datasets.training_dataset(plan, _context(tmp_path, hosts), epochs=epochs)), feeder
    finally:
        feeder.stop()


def test_pipe_training_reads_one_fifo_per_epoch_and_keeps_its_records(tmp_path):
    hosts = Hosts("algo-2", ("algo-1", "algo-2"))
    plan, objects = _pipe_setup(tmp_path, "FullyReplicated", hosts, Layout(1, 2, 0, 1))
    assert len(objects) == 4  # FullyReplicated: every host streams every shard
    batches, feeder = _train_through_fifos(tmp_path, plan, objects, hosts, epochs=2, passes=3)
    assert len(batches) == 2 * plan.steps
    assert _origins(batches) == [(1, 1), (3, 1)]  # global rank 1 reads shards 1 and 3
    assert (feeder.fed, feeder.closed_early, feeder.errors) == (2, 0, [])


def test_pipe_epoch_completes_before_the_next_fifo_exists(tmp_path, monkeypatch):
    """A shuffle buffer spanning passes would wait for pass 2 before finishing epoch 1 (a
    job held between epochs, or a feeder that creates pipes one by one, would hang)."""
    monkeypatch.setenv("TRAINPIPE_PIPE_WAIT_SECONDS", "1")
    hosts = Hosts("algo-1", ("algo-1",))
    plan, objects = _pipe_setup(tmp_path, "ShardedByS3Key", hosts, Layout(0, 1, 0, 1))
    feeder = PipeFeeder(tmp_path / "fifos", "train", objects, passes=1).start()
    try:
        # The 1 s wait is for train_1 alone, which must never be asked for: train_0 is there before the
        # reader looks (a loaded 2-core machine may not run the feeder's thread within 1 s).
        deadline = time.monotonic() + 60
        while not (tmp_path / "fifos" / "train_0").exists():
            assert time.monotonic() < deadline and feeder.errors == [], feeder.errors
            time.sleep(0.01)
        iterator = iter(datasets.training_dataset(plan, _context(tmp_path, hosts), epochs=2))
        first_epoch = [next(iterator) for _ in range(plan.steps)]
    finally:
        feeder.stop()
    assert len(first_epoch) == plan.steps == 21
    assert feeder.fed == 1


def test_keras_fit_opens_exactly_one_fifo_per_epoch_and_channel(tmp_path):
    """Keras makes a second iterator when a dataset's cardinality equals its steps; for a
    Pipe channel that would skip a FIFO or hang. Three epochs must read _0, _1, _2."""
    hosts = Hosts("algo-1", ("algo-1",))
    layout = Layout(0, 1, 0, 1)
    plan, objects = _pipe_setup(tmp_path, "ShardedByS3Key", hosts, layout)
    val_manifest = _write_split(tmp_path / "vsource", "validation", [8, 8])
    val_plan = plan_channel(Channel("validation", "Pipe", "ShardedByS3Key", ""), val_manifest, layout, 4)
    ctx = _context(tmp_path, hosts)
    feeders = [
        PipeFeeder(tmp_path / "fifos", "train", objects, passes=4).start(),
        PipeFeeder(tmp_path / "fifos", "validation", sorted((tmp_path / "vsource").iterdir()), passes=4).start(),
    ]
    model = tf.keras.Sequential([tf.keras.Input((FEATURES,), name="x"), tf.keras.layers.Dense(2, activation="softmax")])
    model.compile(tf.keras.optimizers.legacy.SGD(0.01), "sparse_categorical_crossentropy")
    try:
        history = model.fit(datasets.training_dataset(plan, ctx, 3), steps_per_epoch=plan.steps, epochs=3,
                            validation_data=datasets.validation_dataset(val_plan, ctx),
                            validation_steps=val_plan.steps, verbose=0)
    finally:
        for f in feeders:
            f.stop()
    assert len(history.history["val_loss"]) == 3
    assert [(f.fed, f.closed_early, f.errors) for f in feeders] == [(3, 0, []), (3, 0, [])]


def _fake_pipe_mode_dataset(opened):
    """Stands in for sagemaker_tensorflow.PipeModeDataset: every new iterator reads the next
    FIFO <pipe_dir>/<channel>_<n> (the real one keeps n in state_dir)."""

    def PipeModeDataset(channel, record_format, state_dir, pipe_dir, config_dir):  # noqa: N802
        assert record_format == "TFRecord"

        def generate():
            path = f"{pipe_dir}/{channel}_{len(opened)}"
            opened.append(path)
            with open(path, "rb") as f:
                yield from records.read_records(f, path)

        return tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec((), tf.string))

    module = types.ModuleType("sagemaker_tensorflow")
    module.__spec__ = importlib.machinery.ModuleSpec("sagemaker_tensorflow", None)
    module.PipeModeDataset = PipeModeDataset
    return module


def test_pipe_mode_dataset_when_installed_filters_to_this_ranks_records(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setitem(sys.modules, "sagemaker_tensorflow", _fake_pipe_mode_dataset(opened))
    assert pipe_source.pipe_mode_dataset_available()
    hosts = Hosts("algo-1", ("algo-1", "algo-2"))
    plan, objects = _pipe_setup(tmp_path, "FullyReplicated", hosts, Layout(0, 2, 0, 1))
    batches, _ = _train_through_fifos(tmp_path, plan, objects, hosts, epochs=2)
    assert len(batches) == 2 * plan.steps
    assert _origins(batches) == [(0, 0), (2, 0)]
    assert opened == [str(tmp_path / "fifos" / "train_0"), str(tmp_path / "fifos" / "train_1")]
    # The real PipeModeDataset may open its FIFO when an iterator is made: Keras must make
    # exactly one per pass, which it does only for datasets of unknown cardinality.
    for ds in (datasets.training_dataset(plan, _context(tmp_path, hosts), epochs=1),
               datasets.validation_dataset(plan, _context(tmp_path, hosts))):
        assert tf.data.experimental.cardinality(ds) == tf.data.experimental.UNKNOWN_CARDINALITY


def test_pipe_mode_dataset_stream_too_short_fails_instead_of_running_short(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sagemaker_tensorflow", _fake_pipe_mode_dataset([]))
    hosts = Hosts("algo-1", ("algo-1",))
    plan, objects = _pipe_setup(tmp_path, "ShardedByS3Key", hosts, Layout(0, 1, 0, 1))
    feeder = PipeFeeder(tmp_path / "fifos", "train", objects[:2], passes=1).start()
    try:
        with pytest.raises(tf.errors.FailedPreconditionError, match="expected to contain 84 elements"):
            list(datasets.training_dataset(plan, _context(tmp_path, hosts), epochs=1))
    finally:
        feeder.stop()


def test_batches_parse_to_float_features():
    ds = tf.data.Dataset.from_tensor_slices([examples.serialize(np.arange(FEATURES), 1)] * 4)
    plan = types.SimpleNamespace(batch_size=2)
    x, y = next(iter(datasets._batches(ds, plan, types.SimpleNamespace(num_features=FEATURES, image_size=None))))
    assert x.dtype == tf.float32 and x.numpy().tolist() == [[0, 1, 2]] * 2 and y.numpy().tolist() == [1, 1]


def test_pipe_training_shuffles_each_pass_differently_and_uses_every_record_once(tmp_path):
    hosts = Hosts("algo-1", ("algo-1",))
    plan, objects = _pipe_setup(tmp_path, "ShardedByS3Key", hosts, Layout(0, 1, 0, 1))
    batches, _ = _train_through_fifos(tmp_path, plan, objects, hosts, epochs=2)
    assert all(bx.shape == (4, FEATURES) for bx, _ in batches)
    epochs = [[tuple(x[:2]) for bx, _ in batches[e * plan.steps:(e + 1) * plan.steps] for x in bx.numpy().tolist()]
              for e in range(2)]
    stream = [(float(i), float(j)) for i, count in enumerate((20, 24, 18, 22)) for j in range(count)]
    for epoch in epochs:  # 84 records = 21 batches of 4: every record once per pass, shuffled
        assert sorted(epoch) == sorted(stream) and epoch != stream
    assert epochs[0] != epochs[1]


def test_pipe_image_records_are_decoded_per_record_from_the_handed_batches(tmp_path):
    png = tf.io.encode_png(tf.zeros([5, 7, 1], tf.uint8)).numpy()
    serialized = [examples.serialize_image(png, label, "c", 5, 7) for label in range(6)]
    plan = types.SimpleNamespace(batch_size=3)
    ctx = types.SimpleNamespace(image_size=8, augmentation="none", num_features=0)
    blob = tf.data.Dataset.from_tensors(tf.reshape(tf.constant(serialized), [-1, 3])).map(datasets._block_parser(ctx))
    got = list(datasets._pipe_batches(blob, plan, ctx))
    assert [tuple(x.shape) for x, _ in got] == [(3, 8, 8, 3)] * 2
    assert [y.numpy().tolist() for _, y in got] == [[0, 1, 2], [3, 4, 5]]


def test_pipe_table_blocks_are_parsed_whole_and_handed_on_as_their_batches():
    serialized = [examples.serialize([i, i + 0.5, -i], i) for i in range(6)]
    plan = types.SimpleNamespace(batch_size=3)
    ctx = types.SimpleNamespace(image_size=None, num_features=FEATURES)
    blocks = tf.data.Dataset.from_tensor_slices(tf.reshape(tf.constant(serialized), [1, 2, 3])).map(
        datasets._block_parser(ctx))
    got = list(datasets._pipe_batches(blocks, plan, ctx))
    assert [tuple(x.shape) for x, _ in got] == [(3, FEATURES)] * 2
    assert [y.numpy().tolist() for _, y in got] == [[0, 1, 2], [3, 4, 5]]
    assert got[1][0].numpy()[2].tolist() == [5, 5.5, -5]


@pytest.mark.parametrize("typed", [False, True])
def test_pipe_blocks_parsed_in_parallel_leave_in_the_shuffles_order(tmp_path, monkeypatch, typed):
    """Our reader's blocks are split and parsed several at a time, on every core; the batches
    must still be exactly the shuffle buffer's order (the same seed, the same order), for
    training and validation, float vectors and typed columns alike, and the datasets'
    cardinality unknown (Keras then makes one iterator, i.e. opens one FIFO, per pass: no
    filter is needed to hide it)."""
    counts = (900, 1100, 700)  # 2700 records, batch 4: three ~1024-record blocks per pass
    plan, _ = _pipe_setup(tmp_path, "ShardedByS3Key", ONE_HOST, Layout(0, 1, 0, 1), counts=counts)
    if typed:
        encode = typed_examples.Encoder(TYPED)
        stream = [encode([f"s{i % 2}", str(i * 10000 + j)], i % 2) for i, count in enumerate(counts)
                  for j in range(count)]

        def rows(x):  # a row's identity: its row number (its shard's name beside it)
            return list(zip(x["shard"].numpy().tolist(), x["row"].numpy().tolist(), strict=True))

        def parse(serialized):
            return typed_examples.parse_batch(serialized, TYPED)[0]
    else:
        stream = [examples.serialize([i, j, 0], i % 2) for i, count in enumerate(counts) for j in range(count)]

        def rows(x):
            return x.numpy()[:, :2].tolist()

        def parse(serialized):
            return examples.parse_batch(serialized, FEATURES)[0]
    chunks = [stream[start:start + 500] for start in range(0, len(stream), 500)]
    monkeypatch.setattr(pipe_source.PipeReader, "one_pass", lambda self: iter(chunks))
    for shuffle in (True, False):
        buffer = pipe_batches.ShuffleBuffer(min(plan.quota, SHUFFLE_BUFFER), (1, 0)) if shuffle else None
        expected = [rows(parse(tf.constant(batch)))
                    for batch in _split_blobs(pipe_batches.batched(chunks, plan.batch_size, buffer), plan.batch_size)]
        ctx = _context(tmp_path)
        ctx.columns = TYPED if typed else None
        ds = (datasets.training_dataset(plan, ctx, epochs=1) if shuffle
              else datasets.validation_dataset(plan, ctx))
        assert tf.data.experimental.cardinality(ds) == tf.data.experimental.UNKNOWN_CARDINALITY
        got = [rows(x) for x, _ in ds]
        assert len(got) == plan.steps == len(expected) and got == expected


def test_our_readers_short_stream_fails_the_pass_through_the_parallel_parse(tmp_path):
    """The reader's error (a short rank would deadlock the others) reaches Keras as it is,
    through the map that parses several blocks at once."""
    plan, objects = _pipe_setup(tmp_path, "ShardedByS3Key", ONE_HOST, Layout(0, 1, 0, 1))
    feeder = PipeFeeder(tmp_path / "fifos", "train", objects[:2], passes=1).start()
    try:
        with pytest.raises(tf.errors.UnknownError, match="stream ended after 44 records, with 44 of the 84"):
            list(datasets.training_dataset(plan, _context(tmp_path), epochs=1))
    finally:
        feeder.stop()


def _split_blobs(blobs, batch_size):
    """``pipe_batches.batched``'s blobs -> their batches of serialized records, in order."""
    for blob, lengths in blobs:
        ends = np.cumsum(lengths)
        records_ = [blob[end - length:end] for end, length in zip(ends, lengths, strict=True)]
        yield from (records_[i:i + batch_size] for i in range(0, len(records_), batch_size))


def test_a_table_read_while_tracing_a_function_is_streamed_not_held(tmp_path):
    """ParameterServer: the workers' dataset function is traced on the chief, where the
    in-memory read would loop over symbolic blocks forever (the job hung)."""
    manifest = _write_split(tmp_path / "train", "train", [10, 12])
    channel = Channel("train", "File", "FullyReplicated", str(tmp_path / "train"))
    plan = plan_channel(channel, manifest, Layout(0, 1, 0, 1), batch_size=4)
    held = []

    @tf.function
    def traced():
        held.append(datasets._in_memory_table(plan, _context(tmp_path)))
        return tf.constant(0)

    traced()
    assert held == [None]
    assert datasets._in_memory_table(plan, _context(tmp_path)) is not None  # eagerly: held


def test_a_small_file_table_is_held_in_memory_and_each_pass_is_a_fresh_permutation(tmp_path, monkeypatch):
    manifest = _write_split(tmp_path / "train", "train", [10, 12])
    channel = Channel("train", "File", "FullyReplicated", str(tmp_path / "train"))
    plan = plan_channel(channel, manifest, Layout(0, 1, 0, 1), batch_size=4)
    assert plan.steps == 5  # 22 records, 5 batches of 4 per pass
    held = datasets.training_dataset(plan, _context(tmp_path), epochs=3)
    assert datasets._in_memory_table(plan, _context(tmp_path)) is not None
    monkeypatch.setenv(datasets.IN_MEMORY_ENV, "0")  # 0: always stream, as a large table does
    assert datasets._in_memory_table(plan, _context(tmp_path)) is None
    monkeypatch.setenv(datasets.IN_MEMORY_ENV, str(22 * (4 * FEATURES + 8) / 2**20 / 2))  # half of what it needs
    assert datasets._in_memory_table(plan, _context(tmp_path)) is None
    monkeypatch.setenv(datasets.IN_MEMORY_ENV, "lots")  # a bad value names the variable and the fix
    with pytest.raises(DataError, match=f"{datasets.IN_MEMORY_ENV}='lots': must be a number of MiB"):
        datasets.training_dataset(plan, _context(tmp_path), epochs=3)
    monkeypatch.setenv(datasets.IN_MEMORY_ENV, "0")
    streamed = datasets.training_dataset(plan, _context(tmp_path), epochs=3)
    assert held.element_spec == streamed.element_spec  # Keras sees the same batches either way
    rows = [(int(x[0]), int(x[1]), int(y))
            for bx, by in held.take(plan.steps * 8) for x, y in zip(bx.numpy(), by.numpy(), strict=True)]
    passes = [rows[k:k + plan.quota] for k in range(0, len(rows), plan.quota)]
    for records_of_pass in passes:
        assert len(set(records_of_pass)) == 20  # no record twice within a pass
        assert all(y == i % 2 for i, _, y in records_of_pass)  # features and label stay together
    assert len({tuple(p) for p in passes}) == 8  # every pass in its own order
    assert set().union(*map(set, passes)) == {(i, j, i % 2) for i, n in enumerate([10, 12]) for j in range(n)}
    # The same seed, the same passes (a re-run reproduces its order).
    monkeypatch.delenv(datasets.IN_MEMORY_ENV)
    again = datasets.training_dataset(plan, _context(tmp_path), epochs=3)
    assert [b[0].numpy().tolist() for b in again.take(plan.steps)] == [b[0].numpy().tolist() for b in held.take(plan.steps)]


def test_the_datasets_keras_gets_have_no_autotune_thread_to_wait_for(tmp_path, monkeypatch):
    # Deleting an iterator waits out its autotune thread's sleep: seconds at the end of a fit.
    manifest = _write_split(tmp_path / "train", "train", [10, 12])
    channel = Channel("train", "File", "FullyReplicated", str(tmp_path / "train"))
    plan = plan_channel(channel, manifest, Layout(0, 1, 0, 1), batch_size=4)
    held = datasets.training_dataset(plan, _context(tmp_path), epochs=2)
    validation = datasets.validation_dataset(plan, _context(tmp_path))
    monkeypatch.setenv(datasets.IN_MEMORY_ENV, "0")
    streamed = datasets.training_dataset(plan, _context(tmp_path), epochs=2)
    for ds in (held, validation, streamed):
        assert ds.options().autotune.enabled is False
        assert len(list(ds.take(3))) == 3


def test_the_ranks_share_of_the_cores_is_tf_datas_private_pool(tmp_path, monkeypatch):
    # The local runner sets TF_DATA_THREADS_ENV per rank (pipeline/local/hosts/launch_settings.py).
    from training_entry.contract import TF_DATA_THREADS_ENV

    manifest = _write_split(tmp_path / "train", "train", [10, 12])
    channel = Channel("train", "File", "FullyReplicated", str(tmp_path / "train"))
    plan = plan_channel(channel, manifest, Layout(0, 1, 0, 1), batch_size=4)
    monkeypatch.delenv(TF_DATA_THREADS_ENV, raising=False)
    assert datasets.training_dataset(plan, _context(tmp_path), epochs=1).options().threading.private_threadpool_size is None
    monkeypatch.setenv(TF_DATA_THREADS_ENV, "2")
    for ds in (datasets.training_dataset(plan, _context(tmp_path), epochs=1),
               datasets.validation_dataset(plan, _context(tmp_path))):
        assert ds.options().threading.private_threadpool_size == 2
        assert len(list(ds.take(2))) == 2


TYPED = (
    {"name": "shard", "key": "shard", "type": "categorical", "vocabulary": ["", "s0", "s1"]},
    {"name": "row", "key": "row", "type": "numeric", "mean": 5.0, "std": 3.0},
)


def test_a_small_typed_column_table_is_held_as_a_tensor_per_column(tmp_path, monkeypatch):
    """Typed columns (strings and NaNs) are held in memory too: each pass a fresh
    permutation of every record, a column's cells and the label still in one row, and Keras
    sees the same batches as when the table is streamed."""
    directory = tmp_path / "train"
    directory.mkdir()
    encode, shards = typed_examples.Encoder(TYPED), {}
    for i, count in enumerate([10, 12]):
        name = records.shard_name("train", i, 2)
        records.write_records(str(directory / name), [encode([f"s{i}", "NA" if j == 3 else str(j)], i)
                                                      for j in range(count)])
        shards[name] = count
    manifest = records.Manifest("train", 2, 2, shards, columns=TYPED)
    plan = plan_channel(Channel("train", "File", "FullyReplicated", str(directory)), manifest,
                        Layout(0, 1, 0, 1), batch_size=4)
    ctx = _context(tmp_path)
    ctx.columns = TYPED
    assert datasets._in_memory_table(plan, ctx) is not None
    held = datasets.training_dataset(plan, ctx, epochs=3)
    monkeypatch.setenv(datasets.IN_MEMORY_ENV, str(22 * datasets._row_bytes(2, TYPED) / 2**20 / 2))
    assert datasets._in_memory_table(plan, ctx) is None  # over the budget: streamed
    streamed = datasets.training_dataset(plan, ctx, epochs=3)
    assert held.element_spec == streamed.element_spec
    rows = [(x["shard"].numpy()[k].decode(), float(x["row"].numpy()[k]), int(y.numpy()[k]))
            for x, y in held.take(plan.steps * 4) for k in range(4)]
    passes = [rows[k:k + plan.quota] for k in range(0, len(rows), plan.quota)]
    for one in passes:
        assert len({(s, -1.0 if np.isnan(r) else r) for s, r, _ in one}) == 20
        assert all(s == f"s{y}" for s, _, y in one)  # a row's cells and its label stay together
    assert len({tuple(map(str, p)) for p in passes}) == 4
    assert sum(np.isnan(r) for p in passes for _, r, _ in p) >= 1  # the missing cell stays NaN
