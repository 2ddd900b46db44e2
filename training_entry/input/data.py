"""Input pipelines: which records each rank reads, how many steps every rank runs, tf.data.

FullyReplicated: the one rule for who reads what is ``records.assign_shards``; every rank
computes the same plan from the manifest channel (record counts of every shard), so all ranks
agree on the steps per epoch without reading any data: the minimum over ranks of
floor(records of the rank / batch size). ShardedByS3Key: AWS does not document which objects
each host receives, so nothing here assumes it. In File/FastFile mode a host counts the
shards it actually holds, its ranks split them (by shard, or by record when it holds fewer
shards than ranks), and all ranks agree on the minimum through an allgather
(``plan_channel(..., gather=)``). In Pipe mode the records of the host's stream are dealt to
its ranks in turn, whatever objects it carries, and every rank counts on the records of the
smallest object only (a host receives at least one). Unequal step counts are the classic
Horovod deadlock (horovod#2083): the rank with more batches waits forever in an allreduce.
For the same reason no input pipeline here can run short: File mode repeats its shards, Pipe
mode raises when a stream holds fewer records than the manifest promised.

- File / FastFile: the rank's shards in the channel directory, read with TFRecordDataset.
- Pipe: one FIFO per pass (see ``pipe``); ``sagemaker_tensorflow.PipeModeDataset`` when it
  is installed (SageMaker's TF images) and the rank is alone on its host, else our reader.

Python 3.10 syntax.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import tensorflow as tf

from training_entry.config import Channel, Hosts
from training_entry.failure import UserError, cleanup_on_failure, note_cause
from training_entry.input import examples, images, pipe, pipe_batches, records

SHUFFLE_BUFFER = 10_000
# File mode, table records: a rank whose records, parsed, take at most this many bytes holds
# them in memory after one read and parse, and every later pass is a gather from there.
IN_MEMORY_TABLE_BYTES = 256 << 20
IN_MEMORY_ENV = "TRAINPIPE_IN_MEMORY_TABLE_MB"  # overrides the budget; 0 = always stream


class DataError(UserError):
    """The channels do not hold what the manifest and the job's layout need."""


# --- Where this rank sits ----------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """This rank's place among SageMaker hosts (not MPI's view of the machine)."""

    host_index: int
    host_count: int
    local_rank: int
    local_size: int

    @property
    def world_size(self) -> int:
        return self.host_count * self.local_size


def layout_from_peers(hosts: Hosts, rank: int, host_of_rank: Sequence[str]) -> Layout:
    """Local rank/size among the ranks that report the same SageMaker host.

    ``host_of_rank[r]``: SM_CURRENT_HOST of Horovod rank r (an allgather). On SageMaker this
    equals ``hvd.local_rank()/local_size()``; the local runner simulates several hosts on one
    machine, where MPI sees a single host, so we count by the SageMaker host names.
    """
    counts = Counter(host_of_rank)
    unknown = sorted(set(counts) - set(hosts.hosts))
    if unknown:
        raise DataError(f"ranks report hosts {unknown} that are not in the job's hosts {list(hosts.hosts)}")
    idle = [h for h in hosts.hosts if h not in counts]
    if idle:
        raise DataError(
            f"no training process runs on host(s) {idle} of {list(hosts.hosts)}: their data "
            f"would never be read; launch processes_per_host ranks on every host"
        )
    if len(set(counts.values())) != 1:
        raise DataError(f"hosts run different numbers of ranks ({dict(counts)}); every host must run the same number")
    me = host_of_rank[rank]
    local_rank = sum(1 for r in range(rank) if host_of_rank[r] == me)
    return Layout(hosts.hosts.index(me), len(hosts.hosts), local_rank, counts[me])


# --- The plan: shards, stream routing, steps ---------------------------------------------------
@dataclass(frozen=True)
class ChannelPlan:
    channel: Channel
    manifest: records.Manifest
    layout: Layout
    batch_size: int
    steps: int  # per epoch, identical on every rank
    my_shards: tuple[str, ...]  # this rank's shards (assign_shards order)
    stream: tuple[tuple[str, int], ...]  # Pipe: this host's objects in stream order, with counts
    owners: tuple[int | None, ...]  # Pipe: the local rank that reads each stream object
    # ShardedByS3Key, files: the host holds fewer shards than ranks, each rank reads every
    # local_size-th record of all of them.
    split_records: bool = False
    # ShardedByS3Key, Pipe: records dealt to the host's ranks in turn (no assumed objects);
    # ``guaranteed`` records the stream surely carries.
    round_robin: bool = False
    guaranteed: int = 0

    @property
    def quota(self) -> int:
        """Records each rank uses per pass: exactly steps x batch."""
        return self.steps * self.batch_size

    def router(self) -> pipe.RecordRouter:
        if self.round_robin:
            return pipe.RoundRobinRouter(self.layout.local_size, self.guaranteed)
        return pipe.RecordRouter(self.stream, self.owners)


def rank_shards(manifest: records.Manifest, distribution: str, layout: Layout, host_index: int,
                local_rank: int) -> list[str]:
    return records.assign_shards(
        list(manifest.shards), distribution, host_index, layout.host_count, local_rank, layout.local_size
    )


def host_stream(manifest: records.Manifest, distribution: str, host_index: int, host_count: int) -> list[str]:
    """SageMaker: the objects a host receives, in the order a Pipe stream carries them."""
    names = sorted(manifest.shards)
    if distribution == "ShardedByS3Key":
        return records.host_objects(names, host_index, host_count)
    return names


def steps_per_epoch(manifest: records.Manifest, distribution: str, layout: Layout, batch_size: int,
                    channel: str) -> int:
    """min over all ranks of floor(records of the rank / batch); the same on every rank."""
    world = layout.world_size
    fewest = None
    for host_index in range(layout.host_count):
        for local_rank in range(layout.local_size):
            shards = rank_shards(manifest, distribution, layout, host_index, local_rank)
            rank = host_index * layout.local_size + local_rank
            if not shards:
                raise DataError(
                    f"channel {channel!r}: {len(manifest.shards)} shard(s) for {world} ranks "
                    f"({layout.host_count} host(s) x {layout.local_size}) under {distribution}: "
                    f"rank {rank} gets none; re-run processing with --instance-count x "
                    f"--processes-per-host = {layout.host_count} x {layout.local_size}"
                )
            count = sum(manifest.shards[s] for s in shards)
            if fewest is None or count < fewest[0]:
                fewest = (count, rank, len(shards))
    count, rank, shard_count = fewest
    steps = count // batch_size
    if steps == 0:
        raise DataError(
            f"channel {channel!r}: batch-size {batch_size} is larger than the {count} records "
            f"rank {rank} reads per epoch ({shard_count} shard(s)); lower batch-size to at most "
            f"{count} or give each rank more records"
        )
    return steps


def plan_channel(channel: Channel, manifest: records.Manifest, layout: Layout, batch_size: int,
                 gather: Callable[[object], list] | None = None) -> ChannelPlan:
    """This rank's plan. ``gather`` (Horovod's allgather_object) lets ShardedByS3Key channels
    plan from what the hosts actually received; without it (tests of the FullyReplicated
    arithmetic) the sorted-keys rule of ``records.host_objects`` stands in."""
    if channel.distribution == "ShardedByS3Key" and gather is not None:
        if channel.is_pipe:
            return _plan_sharded_pipe(channel, manifest, layout, batch_size)
        return _plan_sharded_files(channel, manifest, layout, batch_size, gather)
    steps = steps_per_epoch(manifest, channel.distribution, layout, batch_size, channel.name)
    mine = rank_shards(manifest, channel.distribution, layout, layout.host_index, layout.local_rank)
    stream = host_stream(manifest, channel.distribution, layout.host_index, layout.host_count)
    owner_of = {
        shard: local_rank
        for local_rank in range(layout.local_size)
        for shard in rank_shards(manifest, channel.distribution, layout, layout.host_index, local_rank)
    }
    return ChannelPlan(
        channel=channel,
        manifest=manifest,
        layout=layout,
        batch_size=batch_size,
        steps=steps,
        my_shards=tuple(mine),
        stream=tuple((name, manifest.shards[name]) for name in stream),
        owners=tuple(owner_of.get(name) for name in stream),
    )


def _plan_sharded_files(channel: Channel, manifest: records.Manifest, layout: Layout,
                        batch_size: int, gather: Callable[[object], list]) -> ChannelPlan:
    """ShardedByS3Key, File/FastFile: from the shards this host holds; steps agreed by all."""
    present = present_shards(channel, manifest)
    size, local_rank = layout.local_size, layout.local_rank
    split_records = len(present) < size
    if split_records:  # fewer shards than ranks: every rank reads every size-th record
        mine = present
        total = sum(manifest.shards[s] for s in present)
        count = (total - local_rank + size - 1) // size
    else:
        mine = present[local_rank::size]
        count = sum(manifest.shards[s] for s in mine)
    rank = layout.host_index * size + local_rank
    # Horovod: every rank must run the same number of steps; one allgather, then each rank
    # computes the same minimum (and, if one is hopeless, the same error).
    everyone = sorted(gather((count, rank, len(mine))))
    count, rank, shard_count = everyone[0]
    steps = count // batch_size
    if steps == 0:
        raise DataError(
            f"channel {channel.name!r}: batch-size {batch_size} is larger than the {count} records "
            f"rank {rank} reads per epoch ({shard_count} shard(s) on its host under "
            f"ShardedByS3Key); lower batch-size to at most {count} or give each host more records"
        )
    return ChannelPlan(
        channel=channel, manifest=manifest, layout=layout, batch_size=batch_size, steps=steps,
        my_shards=tuple(mine), stream=tuple((name, manifest.shards[name]) for name in present),
        owners=tuple(None for _ in present), split_records=split_records,
    )


def _plan_sharded_pipe(channel: Channel, manifest: records.Manifest, layout: Layout,
                       batch_size: int) -> ChannelPlan:
    """ShardedByS3Key, Pipe: the stream's objects are unknown until read; count on the
    smallest object (every host receives at least one), dealt to the ranks in turn."""
    smallest = min(manifest.shards.values())
    per_rank = smallest // layout.local_size
    steps = per_rank // batch_size
    if steps == 0:
        raise DataError(
            f"channel {channel.name!r}: batch-size {batch_size} is larger than the {per_rank} "
            f"records a rank can count on per pass (Pipe + ShardedByS3Key: a host may receive "
            f"only the smallest object, {smallest} records, shared by {layout.local_size} "
            f"rank(s)); lower batch-size or use FullyReplicated"
        )
    return ChannelPlan(
        channel=channel, manifest=manifest, layout=layout, batch_size=batch_size, steps=steps,
        my_shards=(), stream=(), owners=(), round_robin=True, guaranteed=smallest,
    )


def load_manifest(manifest_channel: Channel, split: str) -> records.Manifest:
    path = os.path.join(manifest_channel.directory, records.manifest_name(split))
    try:
        manifest = records.Manifest.load(path)
    except FileNotFoundError:
        present = sorted(os.listdir(manifest_channel.directory)) if os.path.isdir(manifest_channel.directory) else None
        where = f"it holds {present}" if present is not None else "the directory does not exist"
        raise DataError(
            f"channel {manifest_channel.name!r}: {path} is missing ({where}); the processing "
            f"step writes <split>.json for every split into its 'manifest' output"
        ) from None
    except ValueError as e:
        raise DataError(str(e)) from None
    if manifest.split != split:
        raise DataError(f"{path} describes split {manifest.split!r}, not {split!r}")
    if not manifest.shards:
        raise DataError(f"{path} lists no shards: the {split!r} split is empty; re-run processing")
    return manifest


# --- File / FastFile -----------------------------------------------------------------------------
def present_shards(channel: Channel, manifest: records.Manifest) -> list[str]:
    """The manifest's shards in the channel directory, sorted, after checking it holds some
    and nothing from another processing run."""
    if not os.path.isdir(channel.directory):
        raise DataError(
            f"channel {channel.name!r}: {channel.directory} does not exist; SageMaker downloads "
            f"{channel.mode}-mode channels there (check the channel's S3 URI)"
        )
    entries = sorted(os.listdir(channel.directory))
    present = [n for n in entries if records.is_shard_name(n)]
    if not present:
        shown = ", ".join(entries[:5]) or "nothing"
        raise DataError(
            f"channel {channel.name!r}: {channel.directory} is empty of TFRecord shards (it "
            f"holds {shown}); expected names like {records.shard_name(channel.name, 0, 2)} "
            f"from the processing step"
        )
    stray = [n for n in present if n not in manifest.shards]
    if stray:
        raise DataError(
            f"channel {channel.name!r}: {stray[0]} in {channel.directory} is not in the "
            f"{manifest.split!r} manifest: the shards and the manifest come from different "
            f"processing runs"
        )
    return present


def file_shards(plan: ChannelPlan, hosts: Hosts) -> list[str]:
    """Paths of this rank's shards, after checking the directory holds what the plan says."""
    channel = plan.channel
    present = present_shards(channel, plan.manifest)
    # FullyReplicated: every shard; ShardedByS3Key: what this host was given (the plan).
    expected = {name for name, _ in plan.stream}
    missing = sorted(expected - set(present))
    if missing:
        raise DataError(
            f"channel {channel.name!r} ({channel.distribution}): host {hosts.current} "
            f"({hosts.index + 1} of {hosts.count}) should hold {missing[0]}"
            f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''} but "
            f"{channel.directory} does not"
        )
    return [os.path.join(channel.directory, name) for name in plan.my_shards]


def _rank_file_records(plan: ChannelPlan, hosts: Hosts) -> tf.data.Dataset:
    ds = _file_records(file_shards(plan, hosts))
    if plan.split_records:  # Horovod: a host with fewer shards than ranks splits records
        ds = ds.shard(plan.layout.local_size, plan.layout.local_rank)
    return ds


def _file_records(paths: list[str]) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(paths, buffer_size=1 << 20)


# --- What every input pipeline of this rank needs to know -----------------------------------
@dataclass
class InputContext:
    hosts: Hosts
    fifo_dir: str
    config_dir: str
    private_dir: str
    num_features: int
    seed: int
    image_size: int | None = None  # image records: decoded and resized to this, per record
    augmentation: str = "crop_flip"  # image records, training only (contract.AUGMENTATIONS)
    # Pipe: one reader per channel for the whole job, so a second model.fit (the next
    # transfer-learning phase) opens the channel's next FIFO, not <channel>_0 again.
    pipe_readers: dict = field(default_factory=dict)

    def cleanup(self) -> None:
        shutil.rmtree(self.private_dir, ignore_errors=True)


# --- Pipe ----------------------------------------------------------------------------------------
def private_pipe_dir(run_id: str, host: str) -> str:
    """Where local rank 0 hands other local ranks their records (one per host and job)."""
    return os.path.join(tempfile.gettempdir(), f"trainpipe-pipes-{run_id}-{host}")


def pipe_mode_dataset_available() -> bool:
    """SageMaker: the TF training images ship sagemaker_tensorflow (a TF op library, only
    built for TF <= 2.14 / Python <= 3.10); anything that does not import means our reader."""
    try:
        from sagemaker_tensorflow import PipeModeDataset  # noqa: F401
    except Exception:
        return False
    return True


def pipe_reader_name(plan: ChannelPlan) -> str:
    """Which reader a Pipe channel gets on this rank (for the job's log)."""
    if plan.layout.local_size == 1 and pipe_mode_dataset_available():
        return "PipeModeDataset"
    return records.reader_implementation()


class PipeReader:
    """Makes one pass of a Pipe channel at a time for this rank, whatever the layout."""

    def __init__(self, plan: ChannelPlan, fifo_dir: str, private_dir: str):
        self.plan = plan
        self.fifo_dir = fifo_dir
        self.private_dir = private_dir
        self.hint = pipe.staged_as_files_hint(fifo_dir, plan.channel.name)
        layout = plan.layout
        self.fifos = pipe.FifoSequence(fifo_dir, plan.channel.name)
        self.demux = None
        if layout.local_size > 1 and layout.local_rank == 0:
            os.makedirs(private_dir, mode=0o700, exist_ok=True)
            cleanup_on_failure(lambda: shutil.rmtree(private_dir, ignore_errors=True))
            self.demux = pipe.HostPipeDemux(
                self.fifos, plan.router(), layout.local_size, plan.quota, private_dir, hint=self.hint
            )
        self.passes = 0

    def one_pass(self) -> Iterator[list[bytes]]:
        """This rank's records of the next pass, in lists (one tf.data hand-off per list)."""
        layout = self.plan.layout
        index = self.passes
        self.passes += 1
        if self.demux is not None:
            return self.demux.next_epoch()
        if layout.local_size > 1:
            path = pipe.private_fifo_path(self.private_dir, self.plan.channel.name, layout.local_rank, index)
            # Local rank 0 verified the CRCs already. Wait longer than it waits for the
            # SageMaker FIFO, so that when the platform's pipe never comes, local rank 0's
            # error (naming that pipe) is the job's failure reason, not ours.
            return pipe.read_epoch_chunks(path, self.plan.quota, verify=False, forwarded=True,
                                          timeout=pipe.wait_seconds() + 60)
        return pipe.read_epoch_chunks(
            self.fifos.next_path(), self.plan.quota, owner=layout.local_rank,
            router=self.plan.router(), hint=self.hint,
        )


def _noting_causes(make: Callable[[], Iterator]) -> Callable[[], Iterator]:
    def generate() -> Iterator:
        try:
            yield from make()
        except Exception as error:
            note_cause(error)
            raise

    return generate


def _pipe_mode_dataset_pass(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
    """SageMaker's PipeModeDataset (C++ reader), one rank per host; keep this rank's records."""
    from sagemaker_tensorflow import PipeModeDataset  # SageMaker: in the TF training images

    # A fresh state dir for this job: the FIFO index must start at 0 in every job
    # (PipeModeDataset keeps it in a file, which a reused tree would carry over).
    state_dir = os.path.join(ctx.private_dir, f"pipe-state-{plan.channel.name}")
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    cleanup_on_failure(lambda: shutil.rmtree(ctx.private_dir, ignore_errors=True))
    ds = PipeModeDataset(
        plan.channel.name, record_format="TFRecord", state_dir=state_dir, pipe_dir=ctx.fifo_dir,
        config_dir=ctx.config_dir,
    )
    owners = plan.owners
    if not all(o == plan.layout.local_rank for o in owners):
        ends = []
        total = 0
        for _, count in plan.stream:
            total += count
            ends.append(total)
        ends_t = tf.constant(ends, dtype=tf.int64)
        mine_t = tf.constant([o == plan.layout.local_rank for o in owners])

        def is_mine(index, _record):
            return tf.gather(mine_t, tf.searchsorted(ends_t, [index], side="right")[0])

        ds = ds.enumerate().filter(is_mine).map(lambda _index, record: record)
    # assert_cardinality fails the pass if the stream runs short (a short rank would deadlock
    # the others).
    return ds.take(plan.quota).apply(tf.data.experimental.assert_cardinality(plan.quota))


def _pipe_reader(plan: ChannelPlan, ctx: InputContext) -> PipeReader:
    reader = ctx.pipe_readers.get(plan.channel.name)
    if reader is None:
        reader = ctx.pipe_readers[plan.channel.name] = PipeReader(plan, ctx.fifo_dir, ctx.private_dir)
    return reader


def _uses_pipe_mode_dataset(plan: ChannelPlan) -> bool:
    return plan.layout.local_size == 1 and pipe_mode_dataset_available()


def _pipe_batches(plan: ChannelPlan, ctx: InputContext, shuffle: bool) -> tf.data.Dataset:
    """Our reader: each iterator is one pass (the channel's next FIFO), as blocks of string
    batches ``[batches, plan.batch_size]`` (~1024 records a block; ``plan.steps`` batches in
    all), shuffled within the pass (buffer ``min(quota, SHUFFLE_BUFFER)``, as the File path)
    when ``shuffle``. The records reach tf.data as one blob per block (see ``pipe_batches``)
    and stay together until ``_batches`` has parsed them: no tf.data element per record, and
    one parse per block instead of one per batch."""
    reader = _pipe_reader(plan, ctx)
    batch_size = plan.batch_size

    def one_pass():
        index = reader.passes  # a new order every pass, the same for a given seed
        buffer = pipe_batches.ShuffleBuffer(min(plan.quota, SHUFFLE_BUFFER), (ctx.seed, index)) if shuffle else None
        return pipe_batches.batched(reader.one_pass(), batch_size, buffer)

    def split(blob, lengths):
        records = tf.strings.substr(blob, tf.cumsum(lengths, exclusive=True), lengths)
        return tf.reshape(records, [-1, batch_size])

    return tf.data.Dataset.from_generator(
        _noting_causes(one_pass),
        output_signature=(tf.TensorSpec(shape=(), dtype=tf.string), tf.TensorSpec(shape=(None,), dtype=tf.int64)),
    ).map(split)


def _hide_cardinality(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Keras makes a second iterator when a dataset's cardinality equals steps_per_epoch
    (keras DataHandler.enumerate_epochs); for a Pipe channel every iterator may open the
    next FIFO. An unknown cardinality makes Keras keep exactly one."""
    return ds.filter(lambda *_: True)


# --- The datasets Keras gets ------------------------------------------------------------------
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
    return ds.with_options(options)


def training_dataset(plan: ChannelPlan, ctx: InputContext, epochs: int) -> tf.data.Dataset:
    """``epochs`` epochs of exactly ``plan.steps`` batches each, as one dataset (one iterator)."""
    return _without_autotune_thread(_training_dataset(plan, ctx, epochs))


def validation_dataset(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
    """Each iteration is one pass of ``plan.steps`` batches (Keras iterates it every epoch)."""
    return _without_autotune_thread(_validation_dataset(plan, ctx))


def _training_dataset(plan: ChannelPlan, ctx: InputContext, epochs: int) -> tf.data.Dataset:
    if plan.channel.is_pipe and _uses_pipe_mode_dataset(plan):
        # Each repetition is a new iterator of the pass dataset, i.e. the next FIFO. Shuffle
        # within a pass: a buffer spanning passes would hold epoch k back until pass k+1
        # arrives (a feeder that creates pipes one by one would hang).
        ds = _pipe_mode_dataset_pass(plan, ctx).shuffle(min(plan.quota, SHUFFLE_BUFFER), seed=ctx.seed)
        ds = ds.repeat(epochs)
        # tf.data would otherwise fuse shuffle + repeat into one op that fills its buffer
        # from the next repetition: the same cross-pass wait.
        options = tf.data.Options()
        options.experimental_optimization.shuffle_and_repeat_fusion = False
        return _batches(ds.with_options(options), plan, ctx, training=True, hide_cardinality=True)
    if plan.channel.is_pipe:
        # Our reader: the same within-pass shuffle, done before tf.data (pipe_batches).
        ds = _pipe_batches(plan, ctx, shuffle=True).repeat(epochs)
        return _batches(ds, plan, ctx, training=True, hide_cardinality=True, batched=True)
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
    and the parse used that time). None: stream as usual (images, too large, or fewer
    records than one batch)."""
    if ctx.image_size or plan.channel.is_pipe:
        return None
    row_bytes = 4 * ctx.num_features + 8
    if plan.quota * row_bytes > in_memory_budget():
        return None
    blocks = [examples.parse_batch(block, ctx.num_features)
              for block in _rank_file_records(plan, ctx.hosts).batch(8192)]
    if not blocks:
        return None
    x = tf.concat([b[0] for b in blocks], 0)
    y = tf.concat([b[1] for b in blocks], 0)
    count = int(x.shape[0])
    per_pass = count // plan.batch_size
    if per_pass < 1:
        return None

    def one_pass(index):
        # A permutation per pass (stateless: the same seed gives the same order on a re-run).
        order = tf.argsort(tf.random.stateless_uniform([count], seed=tf.stack([tf.cast(ctx.seed, tf.int64), index])))
        return tf.data.Dataset.from_tensor_slices(
            tf.reshape(order[: per_pass * plan.batch_size], [per_pass, plan.batch_size]))

    ds = tf.data.Dataset.counter().flat_map(one_pass)
    ds = ds.map(lambda rows: (tf.gather(x, rows), tf.gather(y, rows)))
    return ds.prefetch(tf.data.AUTOTUNE)


def _validation_dataset(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
    if plan.channel.is_pipe and _uses_pipe_mode_dataset(plan):
        return _batches(_pipe_mode_dataset_pass(plan, ctx), plan, ctx, hide_cardinality=True)
    if plan.channel.is_pipe:
        return _batches(_pipe_batches(plan, ctx, shuffle=False), plan, ctx, hide_cardinality=True, batched=True)
    ds = _rank_file_records(plan, ctx.hosts).repeat().take(plan.quota)
    return _batches(ds, plan, ctx)


def _parse_block(block: tf.Tensor, num_features: int) -> tuple[tf.Tensor, tf.Tensor]:
    """``[batches, batch]`` serialized records -> (x ``[batches, batch, num_features]``,
    y ``[batches, batch]``)."""
    x, y = examples.parse_batch(tf.reshape(block, [-1]), num_features)
    shape = tf.shape(block)
    return tf.reshape(x, [shape[0], shape[1], num_features]), tf.reshape(y, shape)


def _batches(
    ds: tf.data.Dataset, plan: ChannelPlan, ctx: InputContext, training: bool = False,
    hide_cardinality: bool = False, batched: bool = False,
) -> tf.data.Dataset:
    """Records (``batched``: blocks ``[batches, plan.batch_size]`` of records) -> (x, y)
    batches; only this map differs between table and image records."""
    if ctx.image_size:
        if batched:
            ds = ds.map(lambda block: tf.reshape(block, [-1])).unbatch()
        size, augmentation = ctx.image_size, ctx.augmentation
        # Per record (decode_image takes one image), in parallel; augmentation in training only.
        ds = ds.map(lambda record: images.parse_example(record, size, training, augmentation),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        ds = ds.batch(plan.batch_size, drop_remainder=True)
    else:
        num_features = ctx.num_features
        if not batched:
            # Blocks of whole batches (~1024 records), as the Pipe path hands them over.
            per_block = max(1, pipe_batches.RECORDS_PER_HANDOFF // plan.batch_size)
            ds = ds.batch(plan.batch_size, drop_remainder=True).batch(per_block)
        # A whole block in one parse, then split into its batches: the per-op cost of parsing
        # is paid per ~1024 records, not per batch (the MLP's input then costs a rank on a
        # shared core less of its step).
        ds = ds.map(lambda block: _parse_block(block, num_features),
                    num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    if hide_cardinality:  # per batch, not per record: one filter call per element
        ds = _hide_cardinality(ds)
    return ds.prefetch(tf.data.AUTOTUNE)
