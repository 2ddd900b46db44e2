"""The TFRecord stream readers: the native module (``_records_native.c``, built by
scripts/build_native.sh) and the Python fallback give the same records and refuse the same
corrupt streams with the same message (source, reason, byte offset)."""

from __future__ import annotations

import io
import os
import random

import pytest

from training_entry.input import records


@pytest.fixture(autouse=True)
def _both_readers(reader):
    return reader


class Trickle(io.RawIOBase):
    """A pipe that hands over at most ``most`` bytes per read, as a FIFO may."""

    def __init__(self, data: bytes, most: int):
        self.data = memoryview(data)
        self.most = most

    def readable(self):
        return True

    def read(self, size=-1):
        size = self.most if size is None or size < 0 else min(size, self.most)
        out = bytes(self.data[:size])
        self.data = self.data[size:]
        return out


def _stream(payloads):
    return b"".join(records.frame_record(p) for p in payloads)


def _read(data: bytes, verify: bool = True, most: int | None = None):
    """(records read, error message or None), records in the order the reader handed them."""
    stream = io.BytesIO(data) if most is None else Trickle(data, most)
    got = []
    try:
        for chunk in records.read_record_chunks(stream, "the-pipe", verify):
            assert 0 < len(chunk) <= records.CHUNK_RECORDS
            got.extend(chunk)
    except records.RecordError as error:
        return got, str(error)
    return got, None


@pytest.mark.parametrize("most", [None, 1, 4093])
def test_every_record_whole_whatever_the_reads(most):
    rng = random.Random(7)
    payloads = [b"", b"x"] + [os.urandom(rng.randrange(0, 600)) for _ in range(2500)] + [os.urandom(3 << 20)]
    if most == 1:
        payloads = payloads[:300]  # byte by byte: keep it short
    assert _read(_stream(payloads), most=most) == (payloads, None)


def test_an_empty_stream_has_no_records():
    assert _read(b"") == ([], None)


FIRST = len(records.frame_record(b"first"))
SECOND = len(records.frame_record(b"second record"))


def _corrupt(at: int, xor: int = 0xFF) -> bytes:
    data = bytearray(_stream([b"first", b"second record", b"third"]))
    data[at] ^= xor
    return bytes(data)


@pytest.mark.parametrize(("name", "data", "message"), [
    ("length", _corrupt(FIRST + 0), f"corrupt record length (CRC mismatch) at byte offset {FIRST}"),
    ("length CRC", _corrupt(FIRST + 9), f"corrupt record length (CRC mismatch) at byte offset {FIRST}"),
    ("huge length", _corrupt(FIRST + 7, 0x40), f"corrupt record length (CRC mismatch) at byte offset {FIRST}"),
    ("data", _corrupt(FIRST + 12), f"corrupt record data (CRC mismatch) at byte offset {FIRST}"),
    ("data CRC", _corrupt(FIRST + SECOND - 1), f"corrupt record data (CRC mismatch) at byte offset {FIRST}"),
    ("cut in a header", _stream([b"first", b"second record"])[: FIRST + 5],
     f"truncated record header at byte offset {FIRST}"),
    ("cut in a record", _stream([b"first", b"second record"])[: FIRST + 20],
     f"truncated record at byte offset {FIRST} (expected {SECOND} bytes, got 20)"),
    ("cut in a CRC", _stream([b"first", b"second record"])[:-1],
     f"truncated record at byte offset {FIRST} (expected {SECOND} bytes, got {SECOND - 1})"),
])
@pytest.mark.parametrize("most", [None, 3])
def test_a_bad_record_is_refused_after_the_good_ones(name, data, message, most):
    assert _read(data, most=most) == ([b"first"], f"the-pipe: {message}")


def test_without_verification_a_damaged_payload_passes():
    got, error = _read(_corrupt(FIRST + 12), verify=False)
    assert error is None and len(got) == 3 and got[1] != b"second record"


def test_frame_records_is_the_framing_of_each():
    payloads = [b"", os.urandom(5), os.urandom(70_000)]
    assert records.frame_records(payloads) == _stream(payloads)


def test_the_native_reader_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(records.NATIVE_ENV, "0")
    assert records.load_native() is None


def test_native_crc32c_matches_on_both_code_paths(native_records):
    for size in (0, 1, 7, 8, 9, 63, 64, 1000, 100_003):
        data = os.urandom(size)
        assert native_records.masked_crc32c(data) == records.masked_crc32c(data)
        assert native_records.masked_crc32c(data, True) == records.masked_crc32c(data)  # slice-by-8


def _claiming(length: int, tail: bytes = b"") -> bytes:
    """A good record, then a header claiming ``length`` bytes with a valid length CRC."""
    header = records._LEN.pack(length)
    return _stream([b"first"]) + header + records._CRC.pack(records.masked_crc32c(header)) + tail


@pytest.mark.parametrize("length", [2**64 - 1, 2**63, records.MAX_RECORD_BYTES + 1])
@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("most", [None, 5])
def test_a_length_over_the_limit_is_one_record_error_naming_the_offset(length, verify, most):
    """Not OverflowError or MemoryError (Python), nor the rest of the stream buffered (native)."""
    got = _read(_claiming(length, os.urandom(4000)), verify=verify, most=most)
    assert got == ([b"first"], f"the-pipe: record length {length} at byte offset {FIRST} is over the "
                               f"{records.MAX_RECORD_BYTES}-byte limit of a record (a tf.train.Example is "
                               f"under 2 GiB): the file is corrupt or not TFRecord; re-run the step that wrote it")


def test_a_length_at_the_limit_that_the_stream_does_not_back_is_a_truncation():
    assert _read(_claiming(records.MAX_RECORD_BYTES, b"x" * 100)) == (
        [b"first"], f"the-pipe: truncated record at byte offset {FIRST} "
                    f"(expected {records.MAX_RECORD_BYTES + 16} bytes, got 112)")


def test_a_native_build_of_another_api_is_not_used(monkeypatch):
    import types

    monkeypatch.setitem(__import__("sys").modules, records.NATIVE_MODULE, types.ModuleType(records.NATIVE_MODULE))
    assert records.load_native() is None  # an old build: split() without max_length


def test_frame_takes_its_own_copy_of_the_payloads(native_records):
    """frame() reads the payloads with the GIL released: from a tuple of its own, so a list
    another thread changes meanwhile cannot free them under it. Any iterable will do."""
    payloads = [os.urandom(n) for n in (0, 3, 70_000)]
    assert native_records.frame(iter(payloads)) == native_records.frame(tuple(payloads)) == _stream(payloads)
    with pytest.raises(TypeError, match="frame\\(\\) takes a sequence of bytes"):
        native_records.frame([b"x", "not bytes"])
