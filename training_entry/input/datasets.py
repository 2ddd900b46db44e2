"""The tf.data datasets Keras gets: a rank's batches per its plan, in File, FastFile and Pipe mode.

- File / FastFile: the rank's shards in the channel directory, read with TFRecordDataset,
  repeated so a pass never runs short; a small table is held in memory, parsed, after one read.
- Pipe: one FIFO per pass, from ``pipe_source`` (PipeModeDataset or our reader).

Training gets ``epochs`` passes of exactly ``plan.steps`` batches as one dataset; validation
one pass per iteration (in File/FastFile mode every record of the rank once, in ``plan.steps``
partial batches: ``plan`` says why).

Python 3.10 syntax.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow as tf

from training_entry.config import Hosts
from training_entry.contract import TF_DATA_THREADS_ENV
from training_entry.input import examples, images, pipe_batches, pipe_source, typed_examples
from training_entry.input.context import SHUFFLE_BUFFER, InputContext
from training_entry.input.plan import ChannelPlan, DataError, file_shards

# File mode, table records: a rank whose records, parsed, take at most this many bytes holds
# them in memory after one read and parse, and every later pass is a gather from there.
IN_MEMORY_TABLE_BYTES = 256 << 20
IN_MEMORY_ENV = "TRAINPIPE_IN_MEMORY_TABLE_MB"  # overrides the budget; 0 = always stream
HELD_BLOCK_RECORDS = 2048  # a held table's batches are gathered this many records at a time

def _without_autotune_thread(ds: tf.data.Dataset) -> tf.data.Dataset:
    """``ds`` with tf.data's autotuning off. An iterator's autotune thread sleeps between
    optimisations, the period doubling as training goes on, and deleting the iterator (Keras
    does at the end of every ``fit``, and of every validation pass) waits for that sleep to
    end: a 2-rank job spent 1.5-2.4 s idle after its last epoch (``gdb``: the main thread in
    ``RootDataset::Iterator::~Iterator`` joining ``Model::OptimizeLoop``), and a single
    process up to 1 s. Without it, ``AUTOTUNE`` parallel maps run one call per core and
    prefetch buffers grow on their own; measured as fast or faster (benchmarks/notes.md, P1)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    # The rank's share of the cores (set by the local runner; tf.data's shared pool has one
    # thread per core of the machine, whatever the ranks beside it).
    threads = int(os.environ.get(TF_DATA_THREADS_ENV) or 0)
    if threads > 0:
        options.threading.private_threadpool_size = threads
    return ds.with_options(options)


def training_dataset(plan: ChannelPlan, ctx: InputContext, epochs: int) -> tf.data.Dataset:
    """``epochs`` epochs of exactly ``plan.steps`` batches each, as one dataset (one iterator)."""
    return _without_autotune_thread(_training_dataset(plan, ctx, epochs))


def validation_dataset(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
    """Each iteration is one pass of ``plan.steps`` batches (Keras iterates it every epoch)."""
    return _without_autotune_thread(_validation_dataset(plan, ctx))


def _training_dataset(plan: ChannelPlan, ctx: InputContext, epochs: int) -> tf.data.Dataset:
    if plan.channel.is_pipe and pipe_source.uses_pipe_mode_dataset(plan):
        # Each repetition is a new iterator of the pass dataset, i.e. the next FIFO. Shuffle
        # within a pass: a buffer spanning passes would hold epoch k back until pass k+1
        # arrives (a feeder that creates pipes one by one would hang).
        ds = pipe_source.pipe_mode_dataset_pass(plan, ctx).shuffle(min(plan.quota, SHUFFLE_BUFFER), seed=ctx.seed)
        ds = ds.repeat(epochs)
        # tf.data would otherwise fuse shuffle + repeat into one op that fills its buffer
        # from the next repetition: the same cross-pass wait.
        options = tf.data.Options()
        options.experimental_optimization.shuffle_and_repeat_fusion = False
        return _batches(ds.with_options(options), plan, ctx, training=True, hide_cardinality=True)
    if plan.channel.is_pipe:
        # Our reader: the same within-pass shuffle, done before tf.data (pipe_batches).
        ds = pipe_source.pipe_blocks(plan, ctx, shuffle=True, per_block=_block_parser(ctx)).repeat(epochs)
        return _pipe_batches(ds, plan, ctx, training=True)
    held = _in_memory_table(plan, ctx)
    if held is not None:
        return held
    ds = _rank_file_records(plan, ctx.hosts)
    ds = ds.shuffle(min(plan.quota, SHUFFLE_BUFFER), seed=ctx.seed, reshuffle_each_iteration=True)
    # Never runs out: a shard shorter than its manifest entry cannot starve this rank.
    return _batches(ds.repeat(), plan, ctx, training=True)


def in_memory_budget() -> int:
    """Bytes of parsed table records a rank may hold in memory (``IN_MEMORY_ENV`` in MiB)."""
    raw = os.environ.get(IN_MEMORY_ENV, "").strip()
    if not raw:
        return IN_MEMORY_TABLE_BYTES
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not mib >= 0:
        raise DataError(f"{IN_MEMORY_ENV}={raw!r}: must be a number of MiB, 0 or more "
                        "(0: always stream the table)")
    return int(mib * (1 << 20))


def _in_memory_table(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset | None:
    """File mode, table records that fit ``in_memory_budget()`` parsed: this rank's records
    read and parsed once, then endless passes, each a fresh permutation of all of them (a
    full shuffle, not a buffer's), handed over as whole batches gathered from memory. The
    per-batch parse leaves the epochs after the first: the digits MLP's single process ran
    15% faster (pinned ranks gained nothing measurable: their cores idle at the allreduce,
    and the parse used that time). Typed columns are held the same way, a tensor per column
    (strings included): their parse costs more than a float vector's (a feature per column,
    strings copied), so streamed they would pay it every epoch while a numeric table of the
    same shape does not (benchmarks/input/tables.py). None: stream as usual (images, too large,
    or fewer records than one batch)."""
    if ctx.image_size or plan.channel.is_pipe:
        return None
    if not tf.executing_eagerly():
        # ParameterServer: the workers' dataset function is traced on the chief, where the
        # Python loop below would read symbolic blocks forever: stream instead.
        return None
    columns = getattr(ctx, "columns", None)
    if plan.quota * _row_bytes(ctx.num_features, columns) > in_memory_budget():
        return None
    if columns:
        def parse(block):
            return typed_examples.parse_batch(block, columns)
    else:
        def parse(block):
            return examples.parse_batch(block, ctx.num_features)
    # Blocks parsed on every core the rank has (the first pass waits for all of them).
    blocks = list(_without_autotune_thread(
        _rank_file_records(plan, ctx.hosts).batch(8192).map(parse, num_parallel_calls=tf.data.AUTOTUNE)))
    if not blocks:
        return None
    x = tf.nest.map_structure(lambda *parts: tf.concat(parts, 0), *[b[0] for b in blocks])
    y = tf.concat([b[1] for b in blocks], 0)
    count = int(y.shape[0])
    per_pass = count // plan.batch_size
    if per_pass < 1:
        return None

    def one_pass(index):
        # A permutation per pass (stateless: the same seed gives the same order on a re-run).
        order = tf.argsort(tf.random.stateless_uniform([count], seed=tf.stack([tf.cast(ctx.seed, tf.int64), index])))
        return tf.data.Dataset.from_tensor_slices(
            tf.reshape(order[: per_pass * plan.batch_size], [per_pass, plan.batch_size]))

    # One gather per column for a block of batches, then its batches: a gather's cost is
    # mostly per op, paid per ~2048 records rather than per batch (a table of typed columns
    # has an op per column; measured in benchmarks/input/tables.py).
    per_block = max(1, HELD_BLOCK_RECORDS // plan.batch_size)
    ds = tf.data.Dataset.counter().flat_map(one_pass).batch(per_block)
    ds = ds.map(lambda rows: (tf.nest.map_structure(lambda column: tf.gather(column, rows), x), tf.gather(y, rows)))
    return ds.unbatch().prefetch(tf.data.AUTOTUNE)


def _row_bytes(num_features: int, columns) -> int:
    """Bytes of one parsed record held in memory: float32 features, the int64 label, and a
    string cell as a 24-byte ``tstring`` (names up to 22 bytes inside it, longer ones on the
    heap: the vocabulary's longest, or 64 for a hashed column, whose values are unlisted)."""
    if not columns:
        return 4 * num_features + 8
    total = 8
    for column in typed_examples.kept(columns):
        if column["type"] == typed_examples.NUMERIC:
            total += 4
            continue
        longest = max((len(v.encode("utf-8")) for v in column.get("vocabulary") or ()), default=64)
        total += 24 + (longest if longest > 22 else 0)
    return total


def _validation_dataset(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
    if plan.channel.is_pipe and pipe_source.uses_pipe_mode_dataset(plan):
        return _batches(pipe_source.pipe_mode_dataset_pass(plan, ctx), plan, ctx, hide_cardinality=True)
    if plan.channel.is_pipe:
        return _pipe_batches(pipe_source.pipe_blocks(plan, ctx, shuffle=False, per_block=_block_parser(ctx)), plan, ctx)
    ds = _rank_file_records(plan, ctx.hosts).repeat().take(plan.quota)
    if plan.records:
        return _partial_batches(ds, plan, ctx)
    return _batches(ds, plan, ctx)


def _partial_batches(ds: tf.data.Dataset, plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
    """All ``plan.records`` records of the pass, once each, as exactly ``plan.steps`` batches
    of nearly equal size, the larger ones first (``plan.batch_sizes()``). Horovod: every rank
    runs the same number of evaluation steps, whatever its records."""
    if ctx.image_size:
        size = ctx.image_size
        # Per record (decode_image takes one image), in parallel, before batching.
        ds = ds.map(lambda record: images.parse_example(record, size, False, ctx.augmentation),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        return _group_batches(ds, plan).prefetch(tf.data.AUTOTUNE)
    ds = _group_batches(ds, plan)  # tables: one parse per batch
    columns = getattr(ctx, "columns", None)
    if columns:
        return ds.map(lambda batch: typed_examples.parse_batch(batch, columns)).prefetch(tf.data.AUTOTUNE)
    return ds.map(lambda batch: examples.parse_batch(batch, ctx.num_features)).prefetch(tf.data.AUTOTUNE)


def _group_batches(ds: tf.data.Dataset, plan: ChannelPlan) -> tf.data.Dataset:
    """Elements -> ``plan.steps`` batches of ``plan.batch_sizes()``, in contiguous runs, so
    ``group_by_window`` holds one batch at a time (not the pass)."""
    larger, smaller, larger_count = plan.batch_sizes()
    boundary = larger * larger_count  # elements in the larger batches

    def batch_of(index, *_element):
        return tf.where(index < boundary, index // larger,
                        larger_count + (index - boundary) // max(smaller, 1))

    def one_batch(_key, window):
        return window.map(lambda _index, *element: element[0] if len(element) == 1 else element).batch(larger)

    return ds.enumerate().group_by_window(
        key_func=batch_of,
        reduce_func=one_batch,
        window_size_func=lambda key: tf.where(key < larger_count, tf.constant(larger, tf.int64),
                                              tf.constant(smaller, tf.int64)),
    )


def _rank_file_records(plan: ChannelPlan, hosts: Hosts) -> tf.data.Dataset:
    ds = _file_records(file_shards(plan, hosts))
    if plan.split_records:  # Horovod: a host with fewer shards than ranks splits records
        ds = ds.shard(plan.layout.local_size, plan.layout.local_rank)
    return ds


def _file_records(paths: list[str]) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(paths, buffer_size=1 << 20)


def _hide_cardinality(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Keras makes a second iterator when a dataset's cardinality equals steps_per_epoch
    (keras DataHandler.enumerate_epochs); for a Pipe channel every iterator may open the
    next FIFO. An unknown cardinality makes Keras keep exactly one."""
    return ds.filter(lambda *_: True)


def _parse_block(block: tf.Tensor, num_features: int) -> tuple[tf.Tensor, tf.Tensor]:
    """``[batches, batch]`` serialized records -> (x ``[batches, batch, num_features]``,
    y ``[batches, batch]``)."""
    x, y = examples.parse_batch(tf.reshape(block, [-1]), num_features)
    shape = tf.shape(block)
    return tf.reshape(x, [shape[0], shape[1], num_features]), tf.reshape(y, shape)


def _block_parser(ctx: InputContext) -> Callable[[tf.Tensor], object]:
    """What is done with a block ``[batches, batch]`` of serialized records before it is
    unbatched: a table's is parsed whole (the per-op cost of parsing paid per ~1024 records,
    not per batch: the MLP's input then costs a rank on a shared core less of its step), into
    ``[batches, batch, ...]`` tensors (typed columns: a dict of them); an image block is
    flattened into its records, decoded one by one after (``_decoded_images``)."""
    if ctx.image_size:
        return lambda block: tf.reshape(block, [-1])
    columns = getattr(ctx, "columns", None)
    if columns:  # typed columns (strings and NaNs): a dict of [batch] tensors per batch
        return lambda block: typed_examples.parse_block(block, columns)
    num_features = ctx.num_features
    return lambda block: _parse_block(block, num_features)


def _decoded_images(ds: tf.data.Dataset, plan: ChannelPlan, ctx: InputContext, training: bool) -> tf.data.Dataset:
    """Image records -> batches of decoded, resized images (File and both Pipe readers)."""
    size, augmentation = ctx.image_size, ctx.augmentation
    # Per record (decode_image takes one image), in parallel; augmentation in training only.
    ds = ds.map(lambda record: images.parse_example(record, size, training, augmentation),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    return ds.batch(plan.batch_size, drop_remainder=True)


def _batches(
    ds: tf.data.Dataset, plan: ChannelPlan, ctx: InputContext, training: bool = False,
    hide_cardinality: bool = False,
) -> tf.data.Dataset:
    """Records -> (x, y) batches; only the parse differs between table and image records."""
    if ctx.image_size:
        ds = _decoded_images(ds, plan, ctx, training)
    else:
        # Blocks of whole batches (~1024 records), as the Pipe path hands them over, each
        # parsed in one call, then split into its batches.
        per_block = max(1, pipe_batches.RECORDS_PER_HANDOFF // plan.batch_size)
        ds = ds.batch(plan.batch_size, drop_remainder=True).batch(per_block)
        ds = ds.map(_block_parser(ctx), num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    if hide_cardinality:  # per batch, not per record: one filter call per element
        ds = _hide_cardinality(ds)
    return ds.prefetch(tf.data.AUTOTUNE)


def _pipe_batches(blocks: tf.data.Dataset, plan: ChannelPlan, ctx: InputContext,
                  training: bool = False) -> tf.data.Dataset:
    """Our Pipe reader's blocks, already through ``_block_parser`` (``pipe_source.pipe_blocks``
    runs it beside the split, on every core) -> (x, y) batches. No ``_hide_cardinality``
    filter: ``from_generator``'s cardinality is unknown already, and the filter's function
    call per batch cost ~0.5 us per digits record (~15% of the rest of this tf.data path)."""
    if ctx.image_size:
        return _decoded_images(blocks.unbatch(), plan, ctx, training).prefetch(tf.data.AUTOTUNE)
    return blocks.unbatch().prefetch(tf.data.AUTOTUNE)
