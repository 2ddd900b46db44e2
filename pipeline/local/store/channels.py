"""Input channels: which objects each simulated host gets, and how they reach it.

- Distribution: ``ShardedByS3Key`` gives host i the objects at positions i, i+N, ... of the
  sorted keys (``training_entry.input.records.host_objects``); AWS does not document SageMaker's
  rule, so the entry point never relies on it (it counts what each host holds), and tests
  deal the objects other ways (``DEAL_ENV``). ``FullyReplicated`` gives every host every
  object.
- File: the objects are copied into ``input/data/<channel>``, keeping each key's path relative
  to the channel prefix. FastFile: the same, made read-only (SageMaker mounts a streamed,
  read-only view of S3); never a link into the store, which a script could write through.
- Pipe: ``PipeFeeder`` creates the FIFOs ``input/data/<channel>_<epoch>`` and streams the host's
  objects into them, epoch after epoch, while the job runs.
"""

from __future__ import annotations

import errno
import gzip
import os
import random
import select
import shutil
import stat
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.store.storage import S3Uri, Storage, contained
from training_entry.contract import DISTRIBUTIONS, INPUT_MODES
from training_entry.input.records import host_objects

FULLY_REPLICATED, SHARDED = "FullyReplicated", "ShardedByS3Key"
assert {FULLY_REPLICATED, SHARDED} == set(DISTRIBUTIONS)
FILE, PIPE, FAST_FILE = "File", "Pipe", "FastFile"
assert {FILE, PIPE, FAST_FILE} == set(INPUT_MODES)

# SageMaker: RecordWrapperType=RecordIO wraps each S3 object in one RecordIO record
# (magic, (flag << 29) | length, payload padded to 4 bytes).
RECORDIO_MAGIC = 0xCED7230A
_RECORDIO_MAX = (1 << 29) - 1
PIPE_CHUNK_BYTES = 1 << 20  # each write; PipeModeDataset reads 64 KiB at a time


class ChannelError(UserError):
    """A channel that cannot be staged; the message names it, the counts and the fix."""


@dataclass(frozen=True)
class Channel:
    """One input as the job request describes it (already evaluated)."""

    name: str
    uri: str
    input_mode: str = FILE
    distribution: str = FULLY_REPLICATED
    data_type: str = "S3Prefix"
    record_wrapper: str = "None"
    compression: str = "None"
    content_type: str | None = None
    shuffle_seed: int | None = None

    @classmethod
    def from_training_request(cls, entry: dict, default_input_mode: str) -> Channel:
        """A TrainingJob ``InputDataConfig`` entry; a channel without ``InputMode`` uses the
        job's ``AlgorithmSpecification.TrainingInputMode`` (SageMaker's rule)."""
        source = entry.get("DataSource", {})
        if "S3DataSource" not in source:
            kinds = ", ".join(source) or "nothing"
            raise ChannelError(
                f"channel {entry.get('ChannelName')!r}: data source {kinds} is not supported "
                "locally (only S3DataSource)"
            )
        s3 = source["S3DataSource"]
        shuffle = entry.get("ShuffleConfig") or {}
        return cls(
            name=entry["ChannelName"],
            uri=s3["S3Uri"],
            input_mode=entry.get("InputMode") or default_input_mode,
            distribution=s3.get("S3DataDistributionType") or FULLY_REPLICATED,
            data_type=s3.get("S3DataType") or "S3Prefix",
            record_wrapper=entry.get("RecordWrapperType") or "None",
            compression=entry.get("CompressionType") or "None",
            content_type=entry.get("ContentType"),
            shuffle_seed=shuffle.get("Seed"),
        )

    @property
    def label(self) -> str:
        return f"channel {self.name!r}"

    def check(self) -> None:
        """Refuse what SageMaker refuses (or the local runner cannot do), before staging."""
        S3Uri.parse(self.uri, f"{self.label} S3Uri")
        if self.input_mode not in INPUT_MODES:
            raise ChannelError(f"{self.label}: InputMode {self.input_mode!r}; use one of {', '.join(INPUT_MODES)}")
        if self.distribution not in DISTRIBUTIONS:
            raise ChannelError(
                f"{self.label}: S3DataDistributionType {self.distribution!r}; use one of {', '.join(DISTRIBUTIONS)}"
            )
        if self.data_type != "S3Prefix":
            raise ChannelError(f"{self.label}: S3DataType {self.data_type} is not supported locally; use S3Prefix")
        if self.compression not in ("None", "Gzip"):
            raise ChannelError(f"{self.label}: CompressionType {self.compression!r}; use None or Gzip")
        if self.compression == "Gzip" and self.input_mode != PIPE:
            # SageMaker: compression applies to Pipe mode only.
            raise ChannelError(f"{self.label}: CompressionType Gzip needs InputMode Pipe")
        if self.record_wrapper == "RecordIO" and self.input_mode != PIPE:
            raise ChannelError(f"{self.label}: RecordWrapperType RecordIO needs InputMode Pipe")

    def input_data_config(self) -> dict:
        """SageMaker: this channel's entry in inputdataconfig.json (ContentType only if set)."""
        entry = {
            "TrainingInputMode": self.input_mode,
            "S3DistributionType": self.distribution,
            "RecordWrapperType": self.record_wrapper,
        }
        if self.content_type:
            entry["ContentType"] = self.content_type
        return entry


@dataclass(frozen=True)
class StoredObject:
    uri: str
    relative: str  # path below the channel directory


def relative_key(prefix: str, key: str) -> str:
    """Where object ``key`` lands below the channel directory for prefix ``prefix``.

    A folder-like prefix (``data/train/`` or ``data/train``) keeps the rest of the key
    (``data/train/a/b.tfrecord`` -> ``a/b.tfrecord``); a prefix naming one object
    (``.../model.tar.gz``) or ending mid-name keeps the name from the prefix's last folder.
    """
    rest = key[len(prefix) :]
    if prefix.endswith("/") or rest.startswith("/"):
        return rest.lstrip("/")
    return key[len(prefix.rpartition("/")[0]) :].lstrip("/")


def list_objects(storage: Storage, uri: str, label: str) -> list[StoredObject]:
    """Every object under ``uri``; an empty prefix is an error naming ``label``."""
    prefix = S3Uri.parse(uri, f"{label} S3Uri").key
    found = [u for u in storage.list(uri) if not u.endswith("/")]
    if not found:
        raise ChannelError(
            f"{label}: no objects under {uri} in the {storage.describe()}; check the URI "
            "(it is matched as a key prefix) and that whatever writes it has run"
        )
    return [StoredObject(u, relative_key(prefix, S3Uri.parse(u).key)) for u in found]


def assign(objects: list[StoredObject], distribution: str, host_count: int, label: str,
           uri: str = "") -> list[list[StoredObject]]:
    """Objects per host: ShardedByS3Key splits them (one rule: ``records.host_objects``),
    FullyReplicated copies them to every host."""
    if distribution == FULLY_REPLICATED or host_count == 1:
        return [list(objects) for _ in range(host_count)]
    if len(objects) < host_count:
        # SageMaker: "Don't choose more ML compute instances for training than available S3
        # objects. If you do, some nodes won't get any data."
        raise ChannelError(
            f"{label}: ShardedByS3Key over {host_count} instances needs at least {host_count} "
            f"objects{' under ' + uri if uri else ''}, but there are {len(objects)}; use at most "
            f"{len(objects)} instance{'s' if len(objects) != 1 else ''}, FullyReplicated, or split "
            "the data into more objects"
        )
    by_uri = {o.uri: o for o in objects}
    deal = os.environ.get(DEAL_ENV, "")
    if deal:
        return [[by_uri[u] for u in share] for share in dealt(sorted(by_uri), host_count, deal)]
    return [[by_uri[u] for u in host_objects(list(by_uri), i, host_count)] for i in range(host_count)]


# Tests only: deal ShardedByS3Key objects to hosts another way than the sorted-keys rule,
# since AWS does not document SageMaker's (the entry point must not depend on it).
DEAL_ENV = "TRAINPIPE_TEST_SHARD_DEAL"
DEALS = ("reverse", "uneven")


def dealt(keys: list[str], host_count: int, how: str) -> list[list[str]]:
    """``reverse``: host i gets positions i, i+N, ... of the keys in reverse order.
    ``uneven``: the first host gets only the last key, the others share the rest in turn;
    every host gets at least one."""
    if how == "reverse":
        backwards = keys[::-1]
        return [backwards[i::host_count] for i in range(host_count)]
    if how == "uneven":
        rest = keys[:-1][::-1]
        return [[keys[-1]], *[rest[i::host_count - 1] for i in range(host_count - 1)]]
    raise ChannelError(f"{DEAL_ENV}={how!r}: expected one of {', '.join(DEALS)}")


def stage_files(storage: Storage, objects: list[StoredObject], directory: Path, mode: str) -> None:
    """File: copy each object into ``directory``. FastFile: the same, read-only (SageMaker
    mounts a read-only view of S3). Never a link into the local store: a script that wrote to
    its input would change the object every later run reads (and jobs run as whatever user
    runs trainpipe, often root, whom file modes do not stop)."""
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    for obj in objects:
        target = contained(directory, obj.relative, obj.uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        storage.get_file(obj.uri, target)
        if mode == FAST_FILE:
            target.chmod(READ_ONLY)


READ_ONLY = 0o444


def local_sources(storage: Storage, objects: list[StoredObject], cache: Path) -> list[Path]:
    """Files to stream into a pipe: the store's own files when local, else downloaded once."""
    paths = []
    for obj in objects:
        path = storage.local_path(obj.uri)
        if path is None:
            path = contained(Path(cache), obj.relative, obj.uri)
            if not path.exists():
                storage.get_file(obj.uri, path)
        paths.append(path)
    return paths


# --- Pipe mode -------------------------------------------------------------------------------
def fifo_path(directory: Path, channel: str, epoch: int) -> Path:
    """SageMaker: /opt/ml/input/data/<channel>_<epoch>, epochs from 0."""
    return Path(directory) / f"{channel}_{epoch}"


def recordio_header(length: int) -> bytes:
    if length > _RECORDIO_MAX:
        raise ValueError(f"object of {length} bytes is too large for one RecordIO record")
    return struct.pack("<II", RECORDIO_MAGIC, length)


class _Stopped(Exception):
    pass


POLL_FIRST_S, POLL_LAST_S = 0.001, 0.02  # how often a feeder looks for its epoch's reader


class PipeFeeder(threading.Thread):
    """Streams one host's objects for one Pipe channel, one FIFO per epoch.

    For epoch n: wait (stoppably) for a reader to open ``<ch>_n``; create ``<ch>_{n+1}`` at
    once (SageMaker has the next pipe ready before the reader asks for it); write the objects
    in key order (shuffled per epoch with a ShuffleConfig seed), optionally RecordIO-wrapped
    or gunzipped; close, which the reader sees as EOF. A reader that closes early (EPIPE) is
    normal: the epoch ends there. A host with no objects serves empty pipes.
    """

    def __init__(self, directory: Path, channel: Channel, files: list[Path], stop: threading.Event):
        super().__init__(name=f"pipe-{channel.name}@{directory}", daemon=True)
        self.directory = Path(directory)
        self.channel = channel
        self.files = list(files)
        self.stop_event = stop
        self.epochs_served = 0
        self.bytes_written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            epoch = 0
            path = fifo_path(self.directory, self.channel.name, epoch)
            _mkfifo(path)
            while not self.stop_event.is_set():
                fd = self._open_for_writing(path)
                if fd is None:
                    return
                nxt = fifo_path(self.directory, self.channel.name, epoch + 1)
                _mkfifo(nxt)
                try:
                    self._serve(fd, epoch)
                except BrokenPipeError:
                    pass  # the reader stopped early; the next epoch is a new pipe
                except _Stopped:
                    return
                finally:
                    os.close(fd)
                self.epochs_served += 1
                epoch, path = epoch + 1, nxt
        except BaseException as error:  # reported by FeederSet.stop()
            self.error = error

    def _open_for_writing(self, path: Path) -> int | None:
        # A blocking open() would wait for a reader forever and could not be stopped; poll,
        # every millisecond at first, backing off to every 20: the next epoch's reader usually
        # comes right after the last one closed, and each poll interval's wait is the
        # epoch's start-up (a fixed 20 ms cost 10 ms per epoch on average, 6% of a pass of
        # 40,000 digits records).
        delay = POLL_FIRST_S
        while not self.stop_event.is_set():
            try:
                return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:
                if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                    raise
            self.stop_event.wait(delay)
            delay = min(delay * 1.5, POLL_LAST_S)
        return None

    def _objects(self, epoch: int) -> list[Path]:
        files = list(self.files)
        if self.channel.shuffle_seed is not None:
            random.Random(f"{self.channel.shuffle_seed}:{epoch}").shuffle(files)
        return files

    def _chunks(self, path: Path) -> Iterator[bytes]:
        opener = gzip.open if self.channel.compression == "Gzip" else open
        with opener(path, "rb") as f:
            while chunk := f.read(PIPE_CHUNK_BYTES):
                yield chunk

    def _serve(self, fd: int, epoch: int) -> None:
        for path in self._objects(epoch):
            if self.channel.record_wrapper == "RecordIO":
                payload = b"".join(self._chunks(path))
                padding = b"\0" * (-len(payload) % 4)
                self._write(fd, recordio_header(len(payload)) + payload + padding)
            else:
                for chunk in self._chunks(path):
                    self._write(fd, chunk)

    def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.stop_event.is_set():
                raise _Stopped
            _, writable, _ = select.select([], [fd], [], 0.1)
            if not writable:
                continue
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                continue
            view = view[written:]
            self.bytes_written += written


def _mkfifo(path: Path) -> None:
    try:
        os.mkfifo(path)
    except FileExistsError:
        if not stat.S_ISFIFO(os.stat(path).st_mode):
            raise


class FeederSet:
    """Every feeder of one job: started together, stopped and cleaned up together."""

    def __init__(self):
        self.stop_event = threading.Event()
        self.feeders: list[PipeFeeder] = []

    def add(self, directory: Path, channel: Channel, files: list[Path]) -> PipeFeeder:
        feeder = PipeFeeder(directory, channel, files, self.stop_event)
        self.feeders.append(feeder)
        feeder.start()
        return feeder

    def stop(self, timeout: float = 5.0) -> list[str]:
        """Stop every feeder and remove every FIFO; returns problems worth reporting."""
        self.stop_event.set()
        problems = []
        for feeder in self.feeders:
            feeder.join(timeout)
            if feeder.is_alive():
                problems.append(f"pipe feeder {feeder.name} did not stop")
            elif feeder.error is not None:
                problems.append(f"pipe feeder {feeder.name} failed: {feeder.error!r}")
        for feeder in self.feeders:
            for path in feeder.directory.glob(f"{feeder.channel.name}_*"):
                if path.is_fifo():
                    path.unlink(missing_ok=True)
        return problems


def copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
