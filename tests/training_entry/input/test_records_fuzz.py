"""Bounded fuzzing of the two TFRecord readers (training_entry/input/records.py and
_records_native.c): valid shards, randomly truncated, bit-flipped or given a forged length,
read in random piece sizes; on every input both readers give the same records, or the same
records and the same RecordError. Fixed seed: the same cases every run (~1-2 s)."""

from __future__ import annotations

import io
import random

from training_entry.input import records

CASES = 20_000
SEED = 27


class Pieces(io.RawIOBase):
    """A stream that hands over random piece sizes, as a pipe may."""

    def __init__(self, data: bytes, rng: random.Random):
        self.data = memoryview(data)
        self.rng = rng

    def readable(self):
        return True

    def read(self, size=-1):
        size = min(size, self.rng.randint(1, 9000))
        out = bytes(self.data[:size])
        self.data = self.data[size:]
        return out


def _shard(rng: random.Random) -> bytes:
    sizes = [rng.choice((0, 1, rng.randint(0, 300), rng.randint(0, 300), rng.randint(0, 5000)))
             for _ in range(rng.randint(0, 12))]
    return b"".join(records.frame_record(rng.randbytes(n)) for n in sizes)


def _mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    kind = rng.choice(("truncate", "flip", "flip", "both", "forge", "append", "none"))
    if kind in ("flip", "both") and data:
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    if kind in ("truncate", "both") and data:
        del data[rng.randrange(len(data)):]
    if kind == "forge":  # a length with a valid CRC, at a record boundary or anywhere
        length = rng.choice((2**64 - 1, 2**63, records.MAX_RECORD_BYTES + 1, records.MAX_RECORD_BYTES,
                             rng.randint(0, 2**40)))
        header = records._LEN.pack(length)
        data += header + records._CRC.pack(records.masked_crc32c(header)) + rng.randbytes(rng.randint(0, 40))
    if kind == "append":
        data += rng.randbytes(rng.randint(1, 30))
    return bytes(data)


def _read(data: bytes, verify: bool, piece_seed: int):
    stream = Pieces(data, random.Random(piece_seed))
    got = []
    try:
        for chunk in records.read_record_chunks(stream, "shard-00000-of-00001.tfrecord", verify):
            got.extend(chunk)
    except records.RecordError as error:
        return got, str(error)
    return got, None


def test_both_readers_agree_on_every_damaged_shard(native_records, monkeypatch):
    rng = random.Random(SEED)
    outcomes = {"records": 0, "errors": 0}
    for case in range(CASES):
        data = _mutate(_shard(rng), rng)
        verify = rng.random() < 0.8
        monkeypatch.setattr(records, "native", None)
        python = _read(data, verify, case)
        monkeypatch.setattr(records, "native", native_records)
        native = _read(data, verify, case)
        assert native == python, f"case {case} (verify={verify}): {data.hex()}"
        outcomes["errors" if python[1] else "records"] += 1
    # Both kinds of outcome are exercised, not only refusals.
    print(f"{CASES} cases: {outcomes}")
    assert outcomes["records"] > CASES // 10 and outcomes["errors"] > CASES // 3, outcomes
