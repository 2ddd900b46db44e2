"""Pipe-mode sources: the reader of a rank's records from the channel's FIFOs, and their datasets.

SageMaker: a Pipe channel is one FIFO per pass (see ``pipe``). ``sagemaker_tensorflow.
PipeModeDataset`` reads it when it is installed (SageMaker's TF images) and the rank is alone
on its host; otherwise our reader (``PipeReader``) does, local rank 0 handing the other local
ranks their records through private FIFOs. Either way a pass yields exactly the plan's quota
of records or fails: a short rank would deadlock the others.

Python 3.10 syntax.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

import tensorflow as tf

from training_entry.failure import cleanup_on_failure, note_cause
from training_entry.input import pipe, pipe_batches, records
from training_entry.input.context import SHUFFLE_BUFFER, InputContext
from training_entry.input.plan import ChannelPlan


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


def pipe_mode_dataset_pass(plan: ChannelPlan, ctx: InputContext) -> tf.data.Dataset:
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


def uses_pipe_mode_dataset(plan: ChannelPlan) -> bool:
    return plan.layout.local_size == 1 and pipe_mode_dataset_available()


def pipe_blocks(plan: ChannelPlan, ctx: InputContext, shuffle: bool,
                per_block: Callable[[tf.Tensor], object] | None = None) -> tf.data.Dataset:
    """Our reader: each iterator is one pass (the channel's next FIFO), as blocks of string
    batches ``[batches, plan.batch_size]`` (~1024 records a block; ``plan.steps`` batches in
    all), shuffled within the pass (buffer ``min(quota, SHUFFLE_BUFFER)``, as the File path)
    when ``shuffle``. The records reach tf.data as one blob per block (see ``pipe_batches``)
    and stay together until ``datasets`` has parsed them: no tf.data element per record, and
    one parse per block instead of one per batch.

    ``per_block`` (``datasets``' parse of a block) runs in the same call as the split, on
    every core the rank has, several blocks at once, the blocks leaving in the order the
    generator made them (the shuffle's order, as one call at a time would)."""
    reader = _pipe_reader(plan, ctx)
    batch_size = plan.batch_size

    def one_pass():
        index = reader.passes  # a new order every pass, the same for a given seed
        buffer = pipe_batches.ShuffleBuffer(min(plan.quota, SHUFFLE_BUFFER), (ctx.seed, index)) if shuffle else None
        return pipe_batches.batched(reader.one_pass(), batch_size, buffer)

    def split(blob, lengths):
        records = tf.strings.substr(blob, tf.cumsum(lengths, exclusive=True), lengths)
        return tf.reshape(records, [-1, batch_size])

    blobs = tf.data.Dataset.from_generator(
        _noting_causes(one_pass),
        output_signature=(tf.TensorSpec(shape=(), dtype=tf.string), tf.TensorSpec(shape=(None,), dtype=tf.int64)),
    )
    if per_block is None:
        return blobs.map(split)
    return blobs.map(lambda blob, lengths: per_block(split(blob, lengths)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
