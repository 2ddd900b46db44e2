"""Pipe mode: a pass's lists of records -> shuffled, whole batches, handed to tf.data in bulk.

Why not ``from_generator(lists).unbatch().shuffle().batch()``: every record then becomes a
tf.data element of its own, and converting a Python list of bytes into a string tensor costs
~1 us per record on top (py_func copies each bytes object into a tstring). Together that held
the Pipe input to ~0.8x of ``TFRecordDataset`` on the same shards
(``benchmarks/input/p2_pipe_reader.py``). Here the per-record work is numpy on object arrays (the
shuffle buffer) and one ``b"".join``; tf.data receives one bytes blob plus the records'
lengths per ~1024 records and splits it into ``[batches, batch_size]`` in one op
(``data._pipe_batches``), and a table's block is parsed in one op too: its elements are
blocks of batches, never records.

The shuffle keeps ``tf.data.Dataset.shuffle(buffer_size)``'s contract: a buffer of ``size``
records, each incoming record takes the slot of one drawn at random, which leaves; at the end
of the pass the buffer leaves in random order. It is vectorised per incoming list (the slots
of one list are drawn together, without replacement), so a record can come out at most
``size + len(list)`` positions ahead of where it went in (tf.data: ``size``).

Python 3.10 syntax.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

# Records per hand-off to tf.data: large enough that the per-call cost (a py_func crossing,
# ~30 us) is noise, small enough that the first batch of a pass is not held back.
RECORDS_PER_HANDOFF = 1024
_EMPTY = np.empty(0, dtype=object)


def _objects(items: list[bytes]) -> np.ndarray:
    # np.array(list_of_bytes) would make a fixed-width "S" array: padded copies, and numpy
    # strips trailing NUL bytes from its elements (a record ending in 0x00 would change).
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


class ShuffleBuffer:
    """``Dataset.shuffle(size, seed)`` on lists of records: push lists in, get lists out."""

    def __init__(self, size: int, seed: int | tuple[int, ...]):
        if size < 1:
            raise ValueError(f"shuffle buffer size must be at least 1, got {size}")
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.pool = _EMPTY

    def push(self, records: list[bytes]) -> np.ndarray:
        """Records that leave the buffer as ``records`` enter it (none until it is full)."""
        incoming = _objects(records)
        room = self.size - len(self.pool)
        if room > 0:
            self.pool = np.concatenate((self.pool, incoming[:room]))
            incoming = incoming[room:]
        out = []
        for start in range(0, len(incoming), self.size):
            part = incoming[start:start + self.size]
            slots = self.rng.choice(self.size, len(part), replace=False)
            out.append(self.pool[slots])
            self.pool[slots] = part
        return np.concatenate(out) if out else _EMPTY

    def drain(self) -> np.ndarray:
        """What is left, in random order (the end of the pass)."""
        out = self.pool[self.rng.permutation(len(self.pool))]
        self.pool = _EMPTY
        return out


def framed(records: list[bytes]) -> tuple[bytes, np.ndarray]:
    """Records as one blob and their lengths: one tensor copy instead of one per record."""
    return b"".join(records), np.fromiter(map(len, records), dtype=np.int64, count=len(records))


def batched(chunks: Iterable[list[bytes]], batch_size: int, buffer: ShuffleBuffer | None = None,
            per_handoff: int = RECORDS_PER_HANDOFF) -> Iterator[tuple[bytes, np.ndarray]]:
    """Whole batches of ``chunks``' records (through ``buffer`` when given), several batches
    per item, as ``framed`` blobs; records past the last whole batch are dropped, as
    ``batch(drop_remainder=True)`` drops them (a pass holds a whole number of batches)."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    per_handoff = max(1, per_handoff // batch_size) * batch_size
    pending: list[bytes] = []
    for chunk in chunks:
        pending += chunk if buffer is None else buffer.push(chunk).tolist()
        while len(pending) >= per_handoff:
            yield framed(pending[:per_handoff])
            del pending[:per_handoff]
    if buffer is not None:
        pending += buffer.drain().tolist()
    whole = len(pending) // batch_size * batch_size
    for start in range(0, whole, per_handoff):
        yield framed(pending[start:min(start + per_handoff, whole)])
