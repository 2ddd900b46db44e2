"""Pipe mode readers against real FIFOs (``os.mkfifo``) fed by writer threads.

Every test that reads a stream runs with both TFRecord readers (the ``reader`` fixture: the
native module and the Python fallback): same records, same refusals, same messages.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from training_entry.input import pipe, records
from training_entry.input.pipe import (
    FifoSequence,
    HostPipeDemux,
    PipeError,
    RecordRouter,
    read_epoch,
)


class Writer:
    """SageMaker's side: create the FIFO, wait for a reader, write ``data``, close."""

    def __init__(self, path, data: bytes, create: bool = True):
        self.path = str(path)
        self.data = data
        self.broken = False
        self.done = threading.Event()
        if create:
            os.mkfifo(self.path)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            with open(self.path, "wb") as f:
                f.write(self.data)
        except BrokenPipeError:
            self.broken = True
        finally:
            self.done.set()

    def join(self, timeout=10):
        assert self.done.wait(timeout), "writer still blocked: the reader did not drain the pipe"


def _stream(payloads):
    return b"".join(records.frame_record(p) for p in payloads)


def _shard_records(name: str, count: int, size: int = 100) -> list[bytes]:
    return [f"{name}:{i}:".encode().ljust(size, b".") for i in range(count)]


@pytest.fixture(autouse=True)
def _both_readers(reader):
    return reader


def test_round_trip_through_a_fifo(tmp_path):
    payloads = [b"", b"a", os.urandom(70_000), b"x" * 5] + [os.urandom(300) for _ in range(200)]
    writer = Writer(tmp_path / "train_0", _stream(payloads))
    got = list(read_epoch(str(tmp_path / "train_0"), quota=len(payloads)))
    writer.join()
    assert got == payloads
    assert not writer.broken


def test_keeps_its_records_up_to_the_quota_then_drains(tmp_path):
    # Three shards of 400 records (~160 KB, more than a pipe buffer); this rank owns the middle one.
    shards = [("s0", 400), ("s1", 400), ("s2", 400)]
    router = RecordRouter(shards, [None, 0, None])
    payloads = [r for name, n in shards for r in _shard_records(name, n, 400)]
    writer = Writer(tmp_path / "train_0", _stream(payloads))
    got = list(read_epoch(str(tmp_path / "train_0"), 300, owner=0, router=router))
    assert got == _shard_records("s1", 400, 400)[:300]
    writer.join()  # the writer got to EOF: the reader drained the rest of the pass
    assert not writer.broken


def test_corrupt_record_names_the_offset(tmp_path):
    payloads = [b"first", b"second", b"third"]
    data = bytearray(_stream(payloads))
    second = len(records.frame_record(b"first"))
    data[second + 12] ^= 0xFF  # first byte of the second record's data
    Writer(tmp_path / "train_0", bytes(data))
    reader = read_epoch(str(tmp_path / "train_0"), 3)
    assert next(reader) == b"first"
    with pytest.raises(records.RecordError) as info:
        next(reader)
    assert str(info.value) == f"{tmp_path}/train_0: corrupt record data (CRC mismatch) at byte offset {second}"


def test_truncated_stream_names_the_offset(tmp_path):
    data = _stream([b"first", b"second-record"])
    second = len(records.frame_record(b"first"))
    Writer(tmp_path / "train_0", data[:-6])
    with pytest.raises(records.RecordError) as info:
        list(read_epoch(str(tmp_path / "train_0"), 2))
    assert str(info.value) == (f"{tmp_path}/train_0: truncated record at byte offset {second} "
                               f"(expected 29 bytes, got 23)")


def test_stream_shorter_or_longer_than_the_manifest(tmp_path):
    router = RecordRouter([("s0", 3), ("s1", 3)], [0, 0])
    Writer(tmp_path / "train_0", _stream([b"r"] * 4))
    with pytest.raises(PipeError) as info:
        list(read_epoch(str(tmp_path / "train_0"), 6, router=router))
    assert str(info.value) == (f"{tmp_path}/train_0: the stream ended after 4 records, with 4 of the 6 "
                               f"this rank needs for the pass; the manifest expects 6 records in s0, s1")
    Writer(tmp_path / "train_1", _stream([b"r"] * 7))
    router = RecordRouter([("s0", 3), ("s1", 3)], [0, None])
    with pytest.raises(PipeError, match="the stream has more records than the manifest lists for this host"):
        list(read_epoch(str(tmp_path / "train_1"), 3, owner=1, router=router))


def test_a_fifo_that_never_comes(tmp_path, monkeypatch):
    monkeypatch.setenv(pipe.WAIT_ENV, "0.2")
    (tmp_path / "train").mkdir()
    hint = pipe.staged_as_files_hint(str(tmp_path), "train")
    started = time.monotonic()
    with pytest.raises(PipeError) as info:
        list(read_epoch(str(tmp_path / "train_0"), 1, hint=hint))
    assert time.monotonic() - started < 5
    assert str(info.value).startswith(
        f"waited 0s for Pipe FIFO {tmp_path}/train_0, which never appeared (but {tmp_path}/train "
        f"is a directory: the data was staged for File mode while inputdataconfig.json says Pipe)")


def test_fifo_sequence_counts_per_process():
    fifos = FifoSequence("/in", "train")
    assert [fifos.next_path() for _ in range(3)] == ["/in/train_0", "/in/train_1", "/in/train_2"]
    assert FifoSequence("/in", "train").next_path() == "/in/train_0"  # a new job starts at 0


# --- Local rank 0 reading for two local ranks ----------------------------------------------------
SHARDS = [("s0", 300), ("s1", 300), ("s2", 300), ("s3", 300)]  # ~120 KB each: beyond pipe buffers
OWNERS = [0, 1, 0, 1]


def _shard_payloads():
    return {name: _shard_records(name, n, 400) for name, n in SHARDS}


def _within(seconds, work):
    """Run ``work`` in a thread; fail (instead of hanging the suite) if it deadlocks."""
    result = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert result, f"no result after {seconds}s: deadlock"
    return result[0]


def test_demux_gives_each_local_rank_exactly_its_shards_and_never_waits_for_a_slow_rank(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    payloads = _shard_payloads()
    stream = _stream([r for name, _ in SHARDS for r in payloads[name]])
    quota = 550
    demux = HostPipeDemux(FifoSequence(str(tmp_path), "train"), RecordRouter(SHARDS, OWNERS), 2, quota, str(private))
    for n in range(2):  # two passes, as two epochs
        writer = Writer(tmp_path / f"train_{n}", stream)
        rank0 = _within(10, lambda: [r for chunk in demux.next_epoch() for r in chunk])
        # Rank 1 has not read anything yet (think: blocked in an allreduce) and rank 0 got
        # all its records anyway, and the SageMaker pipe was read to EOF.
        writer.join()
        rank1_path = pipe.private_fifo_path(str(private), "train", 1, n)
        rank1 = []
        for record in read_epoch(rank1_path, quota, verify=False, forwarded=True):
            rank1.append(record)
            time.sleep(0.0005 if len(rank1) < 50 else 0)  # and it is slow
        assert rank0 == (payloads["s0"] + payloads["s2"])[:quota]
        assert rank1 == (payloads["s1"] + payloads["s3"])[:quota]
    # Each private FIFO is removed after its pass, by the demux's own thread: on a loaded 2-core
    # machine that may take seconds, not the 0.1 s it takes when idle.
    deadline = time.monotonic() + 30
    while os.listdir(private) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(private) == []


@pytest.mark.parametrize("corrupt_shard", ["s0", "s3"])
def test_demux_hands_a_stream_error_to_the_ranks_still_reading(tmp_path, corrupt_shard):
    private = tmp_path / "private"
    private.mkdir()
    payloads = _shard_payloads()
    frames = [records.frame_record(r) for name, _ in SHARDS for r in payloads[name]]
    bad = [name for name, _ in SHARDS].index(corrupt_shard) * 300 + 100
    offset = sum(len(f) for f in frames[:bad])
    data = bytearray(b"".join(frames))
    data[offset + 12] ^= 0xFF
    Writer(tmp_path / "train_0", bytes(data))
    quota = 550  # rank 0 has its quota within s2, rank 1 needs records of s3
    demux = HostPipeDemux(FifoSequence(str(tmp_path), "train"), RecordRouter(SHARDS, OWNERS), 2, quota, str(private))
    rank1_error = []

    def rank1():
        try:
            list(read_epoch(pipe.private_fifo_path(str(private), "train", 1, 0), quota, verify=False, forwarded=True))
        except PipeError as e:
            rank1_error.append(str(e))

    reader = threading.Thread(target=rank1)
    reader.start()
    expected = f"{tmp_path}/train_0: corrupt record data (CRC mismatch) at byte offset {offset}"
    if corrupt_shard == "s0":  # in rank 0's share: both ranks fail with the reason
        with pytest.raises(records.RecordError) as info:
            list(demux.next_epoch())
        assert str(info.value) == expected
    else:  # after rank 0 had its quota: rank 0's pass completes, rank 1's fails
        assert sum(len(chunk) for chunk in demux.next_epoch()) == quota
    reader.join(10)
    assert rank1_error == [f"RecordError: {expected}"]


def test_demux_refuses_a_quota_a_rank_cannot_meet(tmp_path):
    with pytest.raises(ValueError, match="local rank 0 owns fewer than 601 records"):
        HostPipeDemux(FifoSequence(str(tmp_path), "t"), RecordRouter(SHARDS, OWNERS), 2, 601, str(tmp_path))
