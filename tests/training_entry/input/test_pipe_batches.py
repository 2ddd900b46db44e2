"""Pipe mode's shuffle buffer and batching before tf.data (training_entry/input/pipe_batches.py)."""

import numpy as np
import pytest

from training_entry.input import pipe_batches as pb


def _records(n, start=0):
    return [f"r{i:05d}".encode() for i in range(start, start + n)]


def _chunks(records, sizes):
    out, at = [], 0
    for size in sizes:
        out.append(records[at:at + size])
        at += size
    assert at == len(records)
    return out


def _unframe(items):
    out = []
    for blob, lengths in items:
        ends = np.cumsum(lengths)
        starts = ends - lengths
        out.append([blob[s:e] for s, e in zip(starts, ends, strict=True)])
    return out


def test_every_record_comes_out_once_in_whole_batches_of_the_size():
    records = _records(1000)
    items = list(pb.batched(_chunks(records, [100, 1, 257, 342, 300]), 8, pb.ShuffleBuffer(64, 1),
                            per_handoff=100))
    handed = _unframe(items)
    assert all(len(h) % 8 == 0 and len(h) <= 96 for h in handed)  # 100 rounds down to 12 batches
    out = [r for h in handed for r in h]
    assert sorted(out) == records  # 1000 = 125 batches of 8: nothing dropped, nothing twice
    assert out != records


def test_records_past_the_last_whole_batch_are_dropped_like_drop_remainder():
    items = list(pb.batched([_records(10), _records(5, 10)], 4))
    assert [r for h in _unframe(items) for r in h] == _records(12)


def test_records_ending_in_nul_bytes_and_empty_records_survive_the_handoff():
    records = [b"a\x00\x00", b"", b"\x00", b"b" * 300 + b"\x00"]
    buffer = pb.ShuffleBuffer(2, 0)
    out = [r for h in _unframe(pb.batched([records], 2, buffer)) for r in h]
    assert sorted(out) == sorted(records)


def test_a_record_comes_out_at_most_buffer_plus_one_list_ahead_of_where_it_went_in():
    size, chunk = 50, 7
    records = _records(700)
    position = {r: i for i, r in enumerate(records)}
    out = [r for h in _unframe(pb.batched(_chunks(records, [chunk] * 100), 1, pb.ShuffleBuffer(size, 3))) for r in h]
    assert sorted(out) == records
    assert max(position[r] - j for j, r in enumerate(out)) <= size + chunk
    # ... and it is a shuffle, not a delay line: records move both ways.
    assert min(position[r] - j for j, r in enumerate(out)) < -size


def test_the_order_is_fixed_by_the_seed_and_differs_between_seeds():
    def order(seed):
        return [r for h in _unframe(pb.batched([_records(500)], 10, pb.ShuffleBuffer(100, seed))) for r in h]

    assert order((7, 0)) == order((7, 0))
    assert order((7, 0)) != order((7, 1))


def test_without_a_buffer_the_stream_order_is_kept():
    records = _records(64)
    assert [r for h in _unframe(pb.batched(_chunks(records, [5, 59]), 16)) for r in h] == records


def test_a_list_longer_than_the_buffer_is_taken_in_parts():
    records = _records(300)
    out = [r for h in _unframe(pb.batched([records], 3, pb.ShuffleBuffer(20, 5))) for r in h]
    assert sorted(out) == records


@pytest.mark.parametrize("size", [0, -1])
def test_a_buffer_needs_one_slot(size):
    with pytest.raises(ValueError, match="at least 1"):
        pb.ShuffleBuffer(size, 0)


def test_a_batch_needs_one_record():
    with pytest.raises(ValueError, match="at least 1"):
        list(pb.batched([_records(3)], 0))
