"""Channel staging for both distributions, and the Pipe feeder with real FIFOs."""

from __future__ import annotations

import os
import struct
import threading
import time

import pytest

from pipeline.local.store import channels as ch
from tests.pipeline.local.helpers import BUCKET, put_objects
from training_entry.input.records import host_objects

PREFIX = f"s3://{BUCKET}/data/train"
# For steps that take ms when idle: a loaded 2-core CI machine may stall one for seconds.
GENEROUS_S = 30


def test_relative_keys_keep_the_path_below_the_prefix():
    assert ch.relative_key("data/train/", "data/train/a/b.tfrecord") == "a/b.tfrecord"
    assert ch.relative_key("data/train", "data/train/a/b.tfrecord") == "a/b.tfrecord"
    assert ch.relative_key("out/model.tar.gz", "out/model.tar.gz") == "model.tar.gz"
    assert ch.relative_key("data/tr", "data/train/x") == "train/x"


def test_sharded_by_s3_key_uses_the_records_rule(local_storage):
    put_objects(local_storage, PREFIX, 5)
    objects = ch.list_objects(local_storage, PREFIX + "/", "channel 'train'")
    shares = ch.assign(objects, ch.SHARDED, 2, "channel 'train'")
    assert [[o.relative for o in share] for share in shares] == [
        ["part-000.txt", "part-002.txt", "part-004.txt"], ["part-001.txt", "part-003.txt"]]
    uris = [o.uri for o in objects]
    assert [[o.uri for o in share] for share in shares] == [host_objects(uris, i, 2) for i in range(2)]
    replicated = ch.assign(objects, ch.FULLY_REPLICATED, 3, "channel 'train'")
    assert all(len(share) == 5 for share in replicated)


def test_sharding_over_more_hosts_than_objects_names_channel_counts_and_fix(local_storage):
    put_objects(local_storage, PREFIX, 2)
    objects = ch.list_objects(local_storage, PREFIX, "channel 'train'")
    with pytest.raises(ch.ChannelError) as error:
        ch.assign(objects, ch.SHARDED, 3, "channel 'train'", PREFIX)
    assert str(error.value) == (
        f"channel 'train': ShardedByS3Key over 3 instances needs at least 3 objects under "
        f"{PREFIX}, but there are 2; use at most 2 instances, FullyReplicated, or split the data "
        "into more objects")


def test_an_empty_channel_is_refused(local_storage):
    with pytest.raises(ch.ChannelError, match=r"channel 'train': no objects under s3://test-bucket/nothing/"):
        ch.list_objects(local_storage, f"s3://{BUCKET}/nothing/", "channel 'train'")


def test_file_copies_and_fastfile_is_read_only_and_cannot_change_the_store(local_storage, tmp_path):
    put_objects(local_storage, PREFIX, 2, name="sub/part-{i}.txt")
    objects = ch.list_objects(local_storage, PREFIX, "channel 'train'")
    ch.stage_files(local_storage, objects, tmp_path / "file", ch.FILE)
    ch.stage_files(local_storage, objects, tmp_path / "fast", ch.FAST_FILE)
    copied = tmp_path / "file" / "sub" / "part-0.txt"
    fast = tmp_path / "fast" / "sub" / "part-0.txt"
    assert copied.read_text() == fast.read_text() == "object 0\n"
    assert fast.stat().st_mode & 0o222 == 0  # SageMaker's FastFile mount is read-only
    # Jobs often run as root, whom modes do not stop: a write must still not reach the store.
    os.chmod(fast, 0o644)
    with open(fast, "w") as f:
        f.write("changed by a script\n")
    assert local_storage.read_bytes(objects[0].uri) == b"object 0\n"


def test_channel_checks_refuse_what_sagemaker_refuses():
    base = {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": PREFIX}}}
    channel = ch.Channel.from_training_request(base, "Pipe")
    assert (channel.input_mode, channel.distribution) == ("Pipe", ch.FULLY_REPLICATED)
    assert channel.input_data_config() == {"TrainingInputMode": "Pipe", "S3DistributionType":
                                           "FullyReplicated", "RecordWrapperType": "None"}
    with pytest.raises(ch.ChannelError, match="Gzip needs InputMode Pipe"):
        ch.Channel("t", PREFIX, compression="Gzip").check()
    with pytest.raises(ch.ChannelError, match="ManifestFile is not supported"):
        ch.Channel("t", PREFIX, data_type="ManifestFile").check()
    with pytest.raises(ch.ChannelError, match="InputMode 'Stream'"):
        ch.Channel("t", PREFIX, input_mode="Stream").check()


# --- Pipe ------------------------------------------------------------------------------------
def _files(tmp_path, contents):
    paths = []
    for i, data in enumerate(contents):
        path = tmp_path / f"obj-{i}"
        path.write_bytes(data)
        paths.append(path)
    return paths


def _read(path, limit=None, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not path.exists():  # SageMaker: retry until the next pipe exists
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)
    with open(path, "rb") as f:
        return f.read(limit) if limit else f.read()


def test_pipe_feeder_streams_every_epoch_and_survives_an_early_close(tmp_path):
    big = os.urandom(300_000)  # several 64 KiB pipe buffers
    files = _files(tmp_path, [b"first|", big, b"|last"])
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    feeders = ch.FeederSet()
    feeder = feeders.add(data_dir, ch.Channel("train", PREFIX, input_mode=ch.PIPE), files)
    expected = b"first|" + big + b"|last"

    assert _read(data_dir / "train_0") == expected
    assert _read(data_dir / "train_1", limit=10) == expected[:10]  # the reader stops early: EPIPE
    assert _read(data_dir / "train_2") == expected  # ... and the next epoch is whole again
    # SageMaker: the next pipe is ready before the reader asks for it.
    deadline = time.monotonic() + GENEROUS_S
    while not (data_dir / "train_3").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (data_dir / "train_3").exists()
    assert feeders.stop() == []
    assert feeder.epochs_served == 3 and not feeder.is_alive()
    assert not list(data_dir.glob("train_*")), "FIFOs must be removed when the job ends"


def test_a_host_without_objects_gets_empty_pipes(tmp_path):
    feeders = ch.FeederSet()
    feeders.add(tmp_path, ch.Channel("validation", PREFIX, input_mode=ch.PIPE), [])
    assert _read(tmp_path / "validation_0") == b""
    assert _read(tmp_path / "validation_1") == b""
    assert feeders.stop() == []


def test_stopping_while_nobody_reads_does_not_hang(tmp_path):
    feeders = ch.FeederSet()
    feeders.add(tmp_path, ch.Channel("train", PREFIX, input_mode=ch.PIPE), _files(tmp_path, [b"x" * 10]))
    time.sleep(0.1)
    assert feeders.stop(timeout=GENEROUS_S) == []  # a feeder that ignored the stop would still be alive


def test_stopping_while_a_reader_is_stalled_mid_object_does_not_hang(tmp_path):
    feeders = ch.FeederSet()
    feeders.add(tmp_path, ch.Channel("train", PREFIX, input_mode=ch.PIPE),
                _files(tmp_path, [os.urandom(2_000_000)]))
    reading, release = threading.Event(), threading.Event()

    def stalled_reader():  # opens the pipe, reads a little, then stalls with it open
        while not (tmp_path / "train_0").exists():
            time.sleep(0.01)
        with open(tmp_path / "train_0", "rb") as pipe:
            pipe.read(100)
            reading.set()
            release.wait(4 * GENEROUS_S)  # past the stop's wait: its close must not free the feeder

    thread = threading.Thread(target=stalled_reader)
    thread.start()
    try:
        assert reading.wait(GENEROUS_S)
        assert feeders.stop(timeout=GENEROUS_S) == []  # a feeder blocked in its write would still be alive
    finally:
        release.set()
        thread.join(5)


def test_recordio_wrapping_frames_each_object(tmp_path):
    feeders = ch.FeederSet()
    channel = ch.Channel("train", PREFIX, input_mode=ch.PIPE, record_wrapper="RecordIO")
    feeders.add(tmp_path, channel, _files(tmp_path, [b"abcde", b"xyz!"]))
    stream = _read(tmp_path / "train_0")
    feeders.stop()
    records, offset = [], 0
    while offset < len(stream):
        magic, header = struct.unpack_from("<II", stream, offset)
        assert magic == ch.RECORDIO_MAGIC
        length = header & ((1 << 29) - 1)
        records.append(stream[offset + 8: offset + 8 + length])
        offset += 8 + length + (-length % 4)
    assert records == [b"abcde", b"xyz!"]
