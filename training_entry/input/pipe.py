"""Pipe mode: read a channel's per-epoch FIFOs, give each local rank exactly its records.

SageMaker: a Pipe channel arrives as FIFOs ``/opt/ml/input/data/<channel>_<n>``, a new one per
pass (n = how many this process has opened for the channel, from 0 in every job, also after
a resume). Each carries the host's objects back to back in sorted key order; read it to EOF or
close it, then open the next. We never seek (``tf.data.TFRecordDataset`` fails on a FIFO with
"Illegal seek"): ``records.read_record_chunks`` streams it and checks the CRCs, a list of
records at a time (in C where the native module is built).

The stream holds whole shards; the manifest's record counts say where each ends, so record i
belongs to the rank whose ``records.assign_shards`` list holds its shard (``RecordRouter``).

Only one process may read a FIFO. With one rank per host that rank reads it itself
(``read_epoch``). With several, local rank 0 reads it for all of them (``HostPipeDemux``):
a reader thread routes each record into an unbounded per-rank queue, and one writer thread
per other local rank forwards its queue into a private FIFO that the rank reads like a
SageMaker pipe. Nothing the reader does waits on a consumer: if local rank 0 waited for its
own batch while rank 1, blocked in an allreduce waiting for rank 0, stopped draining its
share, the job would deadlock. The queues hold what the ranks have not consumed yet of a pass
(or two, with prefetching); ranks advance in lock step (every step is an allreduce), so that
stays small.

Python 3.10 syntax, standard library only.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Iterator, Sequence

from training_entry.failure import UserError, describe
from training_entry.input import records

WAIT_ENV = "TRAINPIPE_PIPE_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 600.0
_READ_BUFFER = 1 << 20
# Marks a forwarded error on a private FIFO. A serialized tf.train.Example never starts
# with a zero byte (protobuf field number 0 is invalid), so no record can look like it.
ERROR_MARK = b"\x00trainpipe-error\x00"


class PipeError(UserError):
    """A Pipe channel's stream does not match the manifest, or never arrived."""


def fifo_path(directory: str, channel: str, index: int) -> str:
    """SageMaker: ``<input data dir>/<channel>_<n>``."""
    return os.path.join(directory, f"{channel}_{index}")


class FifoSequence:
    """The FIFOs one process reads for one channel, in order: ``<channel>_0``, ``_1``, ..."""

    def __init__(self, directory: str, channel: str):
        self.directory = directory
        self.channel = channel
        self.opened = 0

    def next_path(self) -> str:
        path = fifo_path(self.directory, self.channel, self.opened)
        self.opened += 1
        return path


def wait_seconds() -> float:
    return float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_SECONDS))


def open_when_present(path: str, timeout: float | None = None, hint: str = ""):
    """Open ``path`` for reading once it exists (SageMaker may create the next FIFO only after
    the previous one was read; the reader retries). Blocks in open() until a writer opens."""
    timeout = wait_seconds() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            raise PipeError(
                f"waited {timeout:.0f}s for Pipe FIFO {path}, which never appeared{hint}; "
                f"the platform (or the local runner's feeder) creates <channel>_<n> for every "
                f"pass; raise {WAIT_ENV} if the feeder is just slow"
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    if stat.S_ISDIR(os.stat(path).st_mode):
        raise PipeError(f"{path} is a directory, not a Pipe FIFO")
    return open(path, "rb", buffering=_READ_BUFFER)


def staged_as_files_hint(fifo_dir: str, channel: str) -> str:
    """Why a FIFO may be missing: the channel was staged as a directory (File mode)."""
    directory = os.path.join(fifo_dir, channel)
    if os.path.isdir(directory):
        return (
            f" (but {directory} is a directory: the data was staged for File mode while "
            f"inputdataconfig.json says Pipe)"
        )
    return ""


def _drain(stream) -> None:
    """Read to EOF without parsing, so the writer finishes the pass cleanly."""
    while stream.read(_READ_BUFFER):
        pass


# --- Which local rank owns record i of a host's stream ---------------------------------------
class RecordRouter:
    """Record index in one pass of a host's stream -> owning local rank (None: another host's).

    ``objects``: (shard name, record count) in stream order; ``owners``: the local rank that
    reads each of them, or None.
    """

    def __init__(self, objects: Sequence[tuple[str, int]], owners: Sequence[int | None]):
        if len(objects) != len(owners):
            raise ValueError("one owner per object")
        self.objects = list(objects)
        self.owners = list(owners)
        self.ends = []
        total = 0
        for _, count in self.objects:
            total += count
            self.ends.append(total)
        self.total = total

    def owner(self, index: int) -> int | None:
        position = bisect.bisect_right(self.ends, index)
        if position >= len(self.ends):
            raise IndexError(index)
        return self.owners[position]

    def take(self, chunk: Sequence[bytes], first: int, count: int, local_rank: int) -> list[bytes]:
        """The records of ``local_rank`` among ``chunk[:count]``, whose first record is
        record ``first`` of the pass: one slice per object the chunk spans."""
        out: list[bytes] = []
        end = first + count
        position = bisect.bisect_right(self.ends, first)
        low = first
        while low < end and position < len(self.ends):
            high = min(self.ends[position], end)
            if self.owners[position] == local_rank:
                out.extend(chunk[low - first: high - first])
            low = high
            position += 1
        return out

    def records_of(self, local_rank: int) -> int:
        return sum(c for (_, c), o in zip(self.objects, self.owners, strict=True) if o == local_rank)

    def describe(self) -> str:
        names = [name for name, _ in self.objects]
        shown = ", ".join(names[:4]) + (f", ... ({len(names)} objects)" if len(names) > 4 else "")
        return f"{self.total} records in {shown}"


class RoundRobinRouter:
    """ShardedByS3Key over Pipe: which objects reach a host is SageMaker's undocumented
    choice, so the records of the host's stream go to its local ranks in turn (record i to
    local rank i mod size), whatever objects it carries. ``guaranteed``: the records the
    stream surely holds (the smallest object), for the quota check."""

    total = sys.maxsize  # no end known in advance: any number of records is the host's

    def __init__(self, local_size: int, guaranteed: int):
        self.local_size = local_size
        self.guaranteed = guaranteed

    def owner(self, index: int) -> int:
        return index % self.local_size

    def take(self, chunk: Sequence[bytes], first: int, count: int, local_rank: int) -> list[bytes]:
        start = (local_rank - first) % self.local_size
        return list(chunk[start:count:self.local_size])

    def records_of(self, local_rank: int) -> int:
        return (self.guaranteed - local_rank + self.local_size - 1) // self.local_size

    def describe(self) -> str:
        return f"at least {self.guaranteed} records (ShardedByS3Key: the smallest object)"


def _too_long(source: str, router: RecordRouter) -> PipeError:
    return PipeError(
        f"{source}: the stream has more records than the manifest lists for this host "
        f"({router.describe()}); the manifest and the channel's data are from different runs"
    )


def _too_short(source: str, seen: int, kept: int, quota: int, router: RecordRouter | None) -> PipeError:
    expected = f"; the manifest expects {router.describe()}" if router else ""
    return PipeError(
        f"{source}: the stream ended after {seen} records, with {kept} of the {quota} this "
        f"rank needs for the pass{expected}"
    )


# --- One rank reading a stream itself --------------------------------------------------------
def read_epoch_chunks(
    path: str,
    quota: int,
    owner: int | None = None,
    router: RecordRouter | None = None,
    verify: bool = True,
    forwarded: bool = False,
    hint: str = "",
    timeout: float | None = None,
) -> Iterator[list[bytes]]:
    """One pass, in lists of records: exactly ``quota`` records in all, those ``router``
    gives local rank ``owner`` (all records when ``owner`` is None), then stop. Raises
    ``PipeError`` if the stream has fewer, and ``records.RecordError`` (with the byte offset)
    if it is corrupt or truncated. Work is per list, never per record (see records).

    The FIFO is drained and closed *before* the last list is handed over: tf.data stops
    pulling after an epoch's last batch, so code after the final ``yield`` would never run
    and the pipe would stay open with its writer blocked.
    """
    if quota < 1:
        raise ValueError(f"quota must be at least 1, got {quota}")
    if owner is not None and router is None:
        raise ValueError("owner needs a router")
    stream = open_when_present(path, timeout, hint=hint)
    try:
        kept = 0
        seen = 0
        for chunk in records.read_record_chunks(stream, path, verify):
            first = seen
            seen += len(chunk)
            failure = None
            # A forwarded error is the last record its writer sends (see _forward).
            if forwarded and chunk[-1].startswith(ERROR_MARK):
                failure = chunk.pop()[len(ERROR_MARK):].decode(errors="replace")
            in_manifest = len(chunk) if router is None else max(0, min(len(chunk), router.total - first))
            if owner is None:
                mine = chunk[:in_manifest]
            else:
                mine = router.take(chunk, first, in_manifest, owner)
            if kept + len(mine) >= quota:
                mine = mine[: quota - kept]
                _drain(stream)
                stream.close()
                yield mine
                return
            kept += len(mine)
            if mine:
                yield mine
            if failure is not None:
                raise PipeError(failure)
            if in_manifest < len(chunk):
                raise _too_long(path, router)
        raise _too_short(path, seen, kept, quota, router)
    finally:
        stream.close()


def read_epoch(path: str, quota: int, **options) -> Iterator[bytes]:
    """``read_epoch_chunks`` one record at a time."""
    for chunk in read_epoch_chunks(path, quota, **options):
        yield from chunk


# --- Local rank 0 reading for every rank on the host -----------------------------------------
_END = object()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def private_fifo_path(directory: str, channel: str, local_rank: int, index: int) -> str:
    """Where local rank ``local_rank`` reads its share of pass ``index`` (see HostPipeDemux)."""
    return fifo_path(directory, f"{channel}.local{local_rank}", index)


class HostPipeDemux:
    """Local rank 0's side: reads each pass of a channel's FIFO once, for all local ranks.

    ``next_epoch()`` (called by local rank 0's input pipeline when it starts a pass) starts
    the pass and returns local rank 0's records, in lists (records move per list). Passes run one after another: the next
    SageMaker FIFO is opened only when the previous one was read to EOF.
    """

    def __init__(
        self,
        fifos: FifoSequence,
        router: RecordRouter,
        local_size: int,
        quota: int,
        private_dir: str,
        verify: bool = True,
        hint: str = "",
    ):
        for local_rank in range(local_size):
            if router.records_of(local_rank) < quota:
                raise ValueError(f"local rank {local_rank} owns fewer than {quota} records")
        self.fifos = fifos
        self.router = router
        self.local_size = local_size
        self.quota = quota
        self.private_dir = private_dir
        self.verify = verify
        self.hint = hint
        self.passes = 0
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._reader = threading.Thread(
            target=self._read_passes, name=f"pipe-reader-{fifos.channel}", daemon=True
        )
        self._reader.start()

    def next_epoch(self) -> Iterator[list[bytes]]:
        index = self.passes
        self.passes += 1
        queues = [queue.SimpleQueue() for _ in range(self.local_size)]
        for local_rank in range(1, self.local_size):
            path = private_fifo_path(self.private_dir, self.fifos.channel, local_rank, index)
            threading.Thread(
                target=_forward, args=(path, queues[local_rank]),
                name=f"pipe-writer-{self.fifos.channel}-{local_rank}", daemon=True,
            ).start()
        self._requests.put(queues)
        return self._own_records(queues[0])

    def _own_records(self, own: queue.SimpleQueue) -> Iterator[list[bytes]]:
        got = 0
        while got < self.quota:
            item = own.get()
            if isinstance(item, _Failed):
                raise item.error
            if item is _END:  # cannot happen: the reader fails the pass instead
                raise PipeError(f"{self.fifos.channel}: pass ended early")
            got += len(item)
            yield item

    def _read_passes(self) -> None:
        while True:
            queues = self._requests.get()
            try:
                self._read_pass(queues)
            except BaseException as error:  # hand it to every consumer; each rank fails
                for q in queues:
                    q.put(_Failed(error))

    def _read_pass(self, queues: list[queue.SimpleQueue]) -> None:
        path = self.fifos.next_path()
        sent = [0] * self.local_size
        seen = 0
        with open_when_present(path, hint=self.hint) as stream:
            for chunk in records.read_record_chunks(stream, path, self.verify):
                first = seen
                seen += len(chunk)
                in_manifest = max(0, min(len(chunk), self.router.total - first))
                for local_rank, q in enumerate(queues):
                    # Each rank gets exactly its quota; the rest of its shards is dropped
                    # here so every rank runs the same number of steps.
                    if sent[local_rank] < self.quota:
                        mine = self.router.take(chunk, first, in_manifest, local_rank)
                        mine = mine[: self.quota - sent[local_rank]]
                        if mine:
                            sent[local_rank] += len(mine)
                            q.put(mine)
                if in_manifest < len(chunk):
                    raise _too_long(path, self.router)
        short = [r for r in range(self.local_size) if sent[r] < self.quota]
        if short:
            raise _too_short(path, seen, sent[short[0]], self.quota, self.router)
        for q in queues:
            q.put(_END)


def _forward(path: str, source: queue.SimpleQueue) -> None:
    """Writer thread: one local rank's records of one pass into its private FIFO."""
    os.mkfifo(path, 0o600)
    try:
        with open(path, "wb", buffering=1 << 16) as sink:
            while True:
                item = source.get()
                if item is _END:
                    break
                if isinstance(item, _Failed):
                    message = describe(item.error)
                    sink.write(records.frame_record(ERROR_MARK + message.encode()))
                    break
                sink.write(records.frame_records(item))
    except BrokenPipeError:
        pass  # that rank is gone; mpirun is taking the job down
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
