"""Pipe mode in the PyTorch room (``training_torch/data.py``): a channel's epoch FIFOs, made
with os.mkfifo and fed as SageMaker feeds them (the host's objects back to back, a new FIFO
per epoch), read by a host's two local ranks as the TensorFlow room shares them out."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from training_entry import config as job_config
from training_entry.input import pipe, records
from training_entry.input import plan as input_plan
from training_torch import data


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (lengths here stay under 128: one varint byte)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _example(x: list[float], y: int) -> bytes:
    """A serialized tf.train.Example of FEATURE_X floats and a FEATURE_Y label, by hand."""
    def entry(key: str, feature: bytes) -> bytes:
        return _field(1, _field(1, key.encode()) + _field(2, feature))

    floats = _field(2, _field(1, struct.pack(f"<{len(x)}f", *x)))
    label = _field(3, _field(1, bytes([y])))
    return _field(1, entry(records.FEATURE_X, floats) + entry(records.FEATURE_Y, label))


def _shards(counts: list[int]) -> tuple[records.Manifest, list[bytes]]:
    """Shard i's record j holds x = [i, j]; the manifest's record counts; each shard's bytes."""
    names = [records.shard_name("train", i, len(counts)) for i in range(len(counts))]
    blobs = [records.frame_records([_example([float(i), float(j)], j % 3) for j in range(count)])
             for i, count in enumerate(counts)]
    return records.Manifest("train", 2, 3, dict(zip(names, counts, strict=True))), blobs


def _feed(directory: str, blobs: list[bytes], epochs: int) -> threading.Thread:
    """The platform's side: <channel>_<epoch> FIFOs, each the host's objects concatenated."""
    def run():
        for epoch in range(epochs):
            path = pipe.fifo_path(directory, "train", epoch)
            os.mkfifo(path)
            try:
                with open(path, "wb") as fifo:  # blocks until the reader opens it
                    for blob in blobs:
                        fifo.write(blob)
            except BrokenPipeError:
                pass  # the reader took its quota and closed early: that epoch is over

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("distribution, quota, expected", [
    # FullyReplicated: each local rank owns whole shards (records.assign_shards); 10 records,
    # batch 4: 2 whole batches each.
    ("FullyReplicated", 8, {0: [(0.0, float(j)) for j in range(8)], 1: [(1.0, float(j)) for j in range(8)]}),
    # ShardedByS3Key: the host's stream dealt to its ranks in turn; each counts on the smallest
    # object's 10 records / 2 ranks = 5: one batch of 4.
    ("ShardedByS3Key", 4, {0: [(0.0, 0.0), (0.0, 2.0), (0.0, 4.0), (0.0, 6.0)],
                           1: [(0.0, 1.0), (0.0, 3.0), (0.0, 5.0), (0.0, 7.0)]}),
])
def test_two_local_ranks_read_their_share_of_each_epoch_fifo(tmp_path, monkeypatch, distribution, quota, expected):
    monkeypatch.setenv(pipe.WAIT_ENV, "60")  # a broken reader fails the test instead of hanging it
    fifo_dir, private_dir = str(tmp_path / "data"), str(tmp_path / "private")
    os.makedirs(fifo_dir)
    manifest, blobs = _shards([10, 10])
    feeder = _feed(fifo_dir, blobs, epochs=2)
    channel = job_config.Channel("train", "Pipe", distribution, os.path.join(fifo_dir, "train"))
    got: dict[int, list] = {}
    sources: dict[int, data.Source] = {}
    failures: list[BaseException] = []

    def rank(local_rank: int):
        try:
            layout = input_plan.Layout(0, 1, local_rank, 2)
            stream = data.PipeChannel(channel, manifest, layout, 4, fifo_dir, private_dir)
            assert stream.quota == quota
            source = sources[local_rank] = data.Source(records.KIND_TABLE, 0, stream=stream)
            got[local_rank] = [source.epoch() for _ in range(2)]
        except BaseException as error:
            failures.append(error)

    ranks = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(2)]
    for thread in ranks:
        thread.start()
    for thread in [*ranks, feeder]:
        thread.join(120)
    assert not failures, failures
    for local_rank in range(2):
        for split in got[local_rank]:  # both epochs: the same records, decoded without TensorFlow
            assert [tuple(row) for row in split.x.tolist()] == expected[local_rank]
            assert split.y.tolist() == [int(x[1]) % 3 for x in expected[local_rank]]
    # After the last epoch (train.py: every rank past the epoch's all_reduce), local rank 0
    # removes the folder of the private FIFOs.
    sources[1].close()
    assert os.path.isdir(private_dir)
    sources[0].close()
    assert not os.path.exists(private_dir)


def test_one_rank_alone_on_its_host_reads_the_fifo_itself(tmp_path, monkeypatch):
    monkeypatch.setenv(pipe.WAIT_ENV, "60")
    fifo_dir = str(tmp_path / "data")
    os.makedirs(fifo_dir)
    manifest, blobs = _shards([5, 7])
    feeder = _feed(fifo_dir, blobs, epochs=1)
    channel = job_config.Channel("train", "Pipe", "FullyReplicated", os.path.join(fifo_dir, "train"))
    stream = data.PipeChannel(channel, manifest, input_plan.Layout(0, 1, 0, 1), 4, fifo_dir, str(tmp_path / "p"))
    assert stream.demux is None and stream.quota == 12  # 12 records, 3 whole batches
    split = data.Source(records.KIND_TABLE, 0, stream=stream).epoch()
    feeder.join(60)
    assert split.x[:, 0].tolist() == [0.0] * 5 + [1.0] * 7


def test_gpipe_is_refused_a_pipe_channel_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("SM_INPUT_DATA_CONFIG", '{"train": {"TrainingInputMode": "Pipe"}}')
    place = data.RankPlace(0, 1, "algo-1", 0, 2, 2, "gpipe", "id")
    with pytest.raises(ValueError, match="channel train is in Pipe mode: strategy gpipe feeds the same batches"):
        data.sources(["train"], place, kind=records.KIND_TABLE, image_size=0, batch_size=4,
                     manifest_dir=str(tmp_path), channel_dir=lambda name: str(tmp_path / name))
