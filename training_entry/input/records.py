"""The data format between processing, training and evaluation, defined once.

- Examples of a table (``KIND_TABLE``): ``tf.train.Example`` with ``FEATURE_X`` (float list)
  and ``FEATURE_Y`` (int64).
- Examples of an image tree (``KIND_IMAGE``): ``FEATURE_IMAGE`` (bytes: the JPEG/PNG file
  exactly as it was, never re-encoded), ``FEATURE_Y`` (int64 label = index of the class name
  in sorted order), ``FEATURE_CLASS_NAME`` (bytes, UTF-8), ``FEATURE_HEIGHT`` and
  ``FEATURE_WIDTH`` (int64, of the stored image). ``training_entry.input.examples`` encodes both.
- Shards: TFRecord files named ``<split>-<index>-of-<count>.tfrecord``, so that sorted keys
  give host i the shards i, i+N, ... under ShardedByS3Key (see ``assign_shards``).
- Manifest: ``<split>.json`` with every shard's name and record count, the data's kind and,
  for images, the class names (index = label).
- TFRecord framing: ``uint64 length, uint32 masked_crc32c(length), data,
  uint32 masked_crc32c(data)``, little-endian. ``read_records`` streams it from any binary
  file object (a FIFO included: it never seeks, unlike ``tf.data.TFRecordDataset``, whose
  pread fails on a pipe with "Illegal seek") and checks both CRCs.

Standard library only (``google_crc32c`` is used when installed: it is ~100x faster).
``read_record_chunks`` (the Pipe reader's path) hands back lists of records; where the native
module ``_trainpipe_records`` is installed (built from ``_records_native.c`` by
scripts/install.sh) it frames and checks a whole buffer per call in C, with the GIL released,
else it falls back to ``read_records``. Both refuse the same records with the same messages.
Python 3.10 syntax: this module runs in SageMaker's TF 2.14 py310 containers.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

FEATURE_X = "x"
FEATURE_Y = "y"
FEATURE_IMAGE = "image"
FEATURE_CLASS_NAME = "class_name"
FEATURE_HEIGHT = "height"
FEATURE_WIDTH = "width"
# What the shards hold: a table's feature vectors or an image tree's encoded files.
KIND_TABLE = "table"
KIND_IMAGE = "image"
DATA_KINDS = (KIND_TABLE, KIND_IMAGE)
SHARD_SUFFIX = ".tfrecord"
_SHARD_RE = re.compile(r"^(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.tfrecord$")


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}{SHARD_SUFFIX}"


def is_shard_name(name: str) -> bool:
    return bool(_SHARD_RE.match(name))


def manifest_name(split: str) -> str:
    return f"{split}.json"


# --- Which rank reads what -----------------------------------------------------------------
def host_objects(keys: Sequence[str], host_index: int, host_count: int) -> list[str]:
    """SageMaker: ShardedByS3Key gives each host ~1/N of the objects. AWS does not document
    the rule; the local runner deals sorted keys, host i taking positions i, i+N, ... The
    training entry point does not rely on it under ShardedByS3Key (data.plan_channel counts
    what each host actually holds)."""
    if host_count < 1 or not 0 <= host_index < host_count:
        raise ValueError(f"host {host_index} of {host_count} does not exist")
    return sorted(keys)[host_index::host_count]


def assign_shards(
    shards: Sequence[str],
    distribution: str,
    host_index: int,
    host_count: int,
    local_rank: int,
    local_size: int,
) -> list[str]:
    """The shards one rank reads, in the order its host sees them.

    FullyReplicated: every host holds every shard; global rank r takes shards r, r+W, ...
    ShardedByS3Key: the host holds only its share; its local ranks split that share.
    """
    world_size = host_count * local_size
    if distribution == "FullyReplicated":
        rank = host_index * local_size + local_rank
        return sorted(shards)[rank::world_size]
    if distribution == "ShardedByS3Key":
        return host_objects(shards, host_index, host_count)[local_rank::local_size]
    raise ValueError(
        f"unknown S3DataDistributionType {distribution!r}; use FullyReplicated or ShardedByS3Key"
    )


# --- Manifest ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Manifest:
    split: str
    num_features: int  # 0 for images: their sizes vary, the model resizes them
    num_classes: int
    shards: dict[str, int]  # shard name -> record count
    # Per-feature mean and standard deviation of the *train* split: the model standardises its
    # raw input with them (a layer inside the SavedModel, so serving takes raw features too).
    feature_mean: tuple[float, ...] | None = None
    feature_std: tuple[float, ...] | None = None
    kind: str = KIND_TABLE
    # Images: the class folder names, sorted; label i is class_names[i]. Tables: the label
    # column's distinct values, sorted (None: labels were already 0..K-1 integers).
    class_names: tuple[str, ...] | None = None
    # "given" (published with the data) or "carved" (from train by the processing step).
    origin: str | None = None
    # Tables of typed columns (``training_entry.input.columns``): the label column's name, and
    # per feature column its name, record key, type and the train split's statistics or
    # vocabulary. None: the records hold a float vector (FEATURE_X).
    label_column: str | None = None
    columns: tuple[dict, ...] | None = None

    def __post_init__(self):
        if self.kind not in DATA_KINDS:
            raise ValueError(f"manifest kind {self.kind!r} is not one of {DATA_KINDS}")
        if (self.kind == KIND_IMAGE or self.class_names is not None) and (
            self.class_names is None or len(self.class_names) != self.num_classes
        ):
            raise ValueError(f"an image manifest needs {self.num_classes} class names, got {self.class_names!r}")

    @property
    def total_records(self) -> int:
        return sum(self.shards.values())

    def to_json(self) -> str:
        return json.dumps(
            {
                "split": self.split,
                "kind": self.kind,
                "num_features": self.num_features,
                "num_classes": self.num_classes,
                **({"class_names": list(self.class_names)} if self.class_names is not None else {}),
                "total_records": self.total_records,
                "shards": [{"name": n, "records": c} for n, c in sorted(self.shards.items())],
                **(
                    {"feature_mean": list(self.feature_mean), "feature_std": list(self.feature_std)}
                    if self.feature_mean is not None and self.feature_std is not None
                    else {}
                ),
                **({"origin": self.origin} if self.origin is not None else {}),
                **({"label_column": self.label_column} if self.label_column is not None else {}),
                **({"columns": list(self.columns)} if self.columns is not None else {}),
            },
            indent=2,
        )

    @classmethod
    def load(cls, path: str) -> Manifest:
        try:
            with open(path) as f:
                doc = json.load(f)
            return cls(
                split=doc["split"],
                num_features=int(doc["num_features"]),
                num_classes=int(doc["num_classes"]),
                shards={s["name"]: int(s["records"]) for s in doc["shards"]},
                feature_mean=_floats(doc.get("feature_mean")),
                feature_std=_floats(doc.get("feature_std")),
                # Manifests written before images existed have no kind: they are tables.
                kind=doc.get("kind", KIND_TABLE),
                class_names=(
                    None if doc.get("class_names") is None else tuple(str(c) for c in doc["class_names"])
                ),
                origin=doc.get("origin"),
                label_column=doc.get("label_column"),
                columns=None if doc.get("columns") is None else tuple(dict(c) for c in doc["columns"]),
            )
        except FileNotFoundError:
            raise FileNotFoundError(
                f"manifest {path} is missing: the processing step writes one per split"
            ) from None
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"manifest {path} is malformed ({e!r}); re-run processing") from e


def _floats(values) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


# --- CRC32C --------------------------------------------------------------------------------
def _make_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()


def _crc32c_python(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # C implementation with SSE4.2 where present
    from google_crc32c import value as _crc32c_c
except ImportError:  # pragma: no cover - depends on the container
    _crc32c_c = None

crc32c = _crc32c_c or _crc32c_python
CRC_IMPLEMENTATION = "google_crc32c" if _crc32c_c else "python"


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# --- TFRecord framing ------------------------------------------------------------------------
_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
# The longest record either reader accepts. A record is one serialized tf.train.Example, and
# protobuf cannot serialize or parse a message of 2 GiB or more (its sizes are int32), so no
# shard of ours holds a longer one, nor does TensorFlow's reader hand one to ParseExample. A
# longer length with a valid CRC comes from a foreign or crafted file: refused by its offset
# before any buffer of that size is asked for (Python raised OverflowError or MemoryError,
# the native path buffered the rest of the stream).
MAX_RECORD_BYTES = (1 << 31) - 1
# The most one read asks for: a record's body is read in pieces of this size, so a length
# that the stream does not back costs no more memory than the stream holds.
_MAX_READ = 64 << 20


class RecordError(ValueError):
    """A TFRecord stream is truncated or corrupt; the message names the source and offset."""


def frame_record(data: bytes) -> bytes:
    length = _LEN.pack(len(data))
    return length + _CRC.pack(masked_crc32c(length)) + data + _CRC.pack(masked_crc32c(data))


def write_records(path: str, records: Sequence[bytes]) -> None:
    """Write a TFRecord file atomically (a reader never sees half a shard)."""
    tmp = f"{path}.partial"
    with open(tmp, "wb") as f:
        for data in records:
            f.write(frame_record(data))
    os.replace(tmp, path)


def read_records(stream, source: str, verify: bool = True) -> Iterator[bytes]:
    """Yield each record's payload from a binary stream, reading sequentially to EOF.

    ``source`` names the stream in errors (a shard path or a FIFO). A stream that ends
    between records is fine; one that ends inside a record, or whose CRC does not match,
    raises ``RecordError`` with the byte offset of the bad record.
    """
    offset = 0
    read = stream.read
    while True:
        header = _read_exactly(read, 12)
        if not header:
            return
        if len(header) < 12:
            raise RecordError(f"{source}: truncated record header at byte offset {offset}")
        (length,) = _LEN.unpack_from(header)
        if verify and _CRC.unpack_from(header, 8)[0] != masked_crc32c(header[:8]):
            raise RecordError(f"{source}: corrupt record length (CRC mismatch) at byte offset {offset}")
        if length > MAX_RECORD_BYTES:
            raise RecordError(_too_long(source, length, offset))
        body = _read_exactly(read, length + 4)
        if len(body) < length + 4:
            raise RecordError(
                f"{source}: truncated record at byte offset {offset} "
                f"(expected {length + 16} bytes, got {len(body) + 12})"
            )
        data = body[:length]
        if verify and _CRC.unpack_from(body, length)[0] != masked_crc32c(data):
            raise RecordError(f"{source}: corrupt record data (CRC mismatch) at byte offset {offset}")
        yield data
        offset += length + 16


def _too_long(source: str, length: int, offset: int) -> str:
    return (f"{source}: record length {length} at byte offset {offset} is over the "
            f"{MAX_RECORD_BYTES}-byte limit of a record (a tf.train.Example is under 2 GiB): "
            f"the file is corrupt or not TFRecord; re-run the step that wrote it")


def _read_exactly(read, size: int) -> bytes:
    """``read`` until ``size`` bytes or EOF: a pipe returns short reads. At most ``_MAX_READ``
    per call, so what is allocated follows what the stream holds, not what it claims."""
    chunk = read(min(size, _MAX_READ))
    if len(chunk) == size or not chunk:
        return chunk
    parts = [chunk]
    got = len(chunk)
    while got < size:
        chunk = read(min(size - got, _MAX_READ))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


# --- Native reader (whole buffers per call) -------------------------------------------------------
NATIVE_MODULE = "_trainpipe_records"
NATIVE_ENV = "TRAINPIPE_NATIVE_RECORDS"  # "0": use the Python reader even where the native one is built
NATIVE_API = 2  # the module's ``api``: a build of older source (another split()) is not used
CHUNK_RECORDS = 1024  # at most this many records per chunk
_READ_SIZE = 1 << 20


def load_native():
    """The native module, or None (not built for this Python, or switched off)."""
    if os.environ.get(NATIVE_ENV, "1") == "0":
        return None
    try:
        module = importlib.import_module(NATIVE_MODULE)
    except Exception:  # ImportError, or a build for another Python / TF image
        return None
    return module if getattr(module, "api", 1) == NATIVE_API else None


native = load_native()


def reader_implementation() -> str:
    return f"native ({native.crc})" if native is not None else f"python (CRC: {CRC_IMPLEMENTATION})"


def frame_records(payloads: Sequence[bytes]) -> bytes:
    """Every payload framed, back to back."""
    if native is not None:
        return native.frame(payloads)
    return b"".join(frame_record(p) for p in payloads)


def read_record_chunks(stream, source: str, verify: bool = True) -> Iterator[list[bytes]]:
    """``read_records`` in lists of at most ``CHUNK_RECORDS`` (never empty): the same records,
    the same errors (raised after the list of the good records before the bad one)."""
    if native is None:
        chunk: list[bytes] = []
        try:
            for record in read_records(stream, source, verify):
                chunk.append(record)
                if len(chunk) == CHUNK_RECORDS:
                    yield chunk
                    chunk = []
        except RecordError:
            if chunk:  # the good records first, as the native reader does
                yield chunk
            raise
        if chunk:
            yield chunk
        return
    yield from _native_chunks(native, stream, source, verify)


def _native_chunks(lib, stream, source: str, verify: bool) -> Iterator[list[bytes]]:
    read = stream.read
    # Bytes read and not yet framed are buffer[start:], at byte offset ``offset`` of the
    # stream. The native split reads them through a memoryview (no copy per chunk); the
    # consumed head is dropped once per read, and reads are appended in place, so a long
    # record costs linear copying, not a new buffer per read.
    buffer = bytearray()
    start = 0
    offset = 0
    eof = False
    while True:
        with memoryview(buffer) as view:
            chunk, used, error = lib.split(view[start:], CHUNK_RECORDS, verify, MAX_RECORD_BYTES)
        at_chunk = offset
        start += used
        offset += used
        if chunk:
            yield chunk
        if error is not None:
            kind, at = error
            if kind == "size":
                (length,) = _LEN.unpack_from(buffer, start - used + at)
                raise RecordError(_too_long(source, length, at_chunk + at))
            what = "record length" if kind == "length" else "record data"
            raise RecordError(f"{source}: corrupt {what} (CRC mismatch) at byte offset {at_chunk + at}")
        if len(chunk) == CHUNK_RECORDS:
            continue  # more whole records may be buffered
        # What is left is one incomplete record (or nothing).
        left = len(buffer) - start
        if eof:
            if not left:
                return
            if left < 12:
                raise RecordError(f"{source}: truncated record header at byte offset {offset}")
            (length,) = _LEN.unpack_from(buffer, start)
            raise RecordError(
                f"{source}: truncated record at byte offset {offset} "
                f"(expected {length + 16} bytes, got {left})"
            )
        size = _READ_SIZE
        if left >= 12:  # the length is checked (or unchecked by choice) and capped: read up to it
            size = max(size, min(_LEN.unpack_from(buffer, start)[0] + 16 - left, 64 * _READ_SIZE))
        del buffer[:start]
        start = 0
        more = read(size)
        if more:
            buffer += more
        else:
            eof = True


def read_file_records(path: str, verify: bool = True) -> Iterator[bytes]:
    with open(path, "rb", buffering=1 << 20) as f:
        yield from read_records(f, path, verify)
