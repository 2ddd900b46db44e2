"""Every boto3 client trainpipe makes, made here: bounded connects, reads and retries, and a
deadline for each API call as a whole.

botocore's own bounds are per attempt and per socket read: ``read_timeout`` restarts with every
byte, so an endpoint (a proxy, a half-broken emulator, a captive portal) that trickles its
answer keeps a call going for ever, and one that never answers costs every attempt's read
timeout plus the back-off between them. So each client is made with one ``Config`` (explicit
connect and read timeouts, standard retries with a bounded number of attempts), and is handed
out wrapped so that each API call, retries included, ends by ``TRAINPIPE_AWS_DEADLINE_S``
(120 s unless set), with ``AwsDeadlineExceeded`` naming the operation, the endpoint and the fix.

Python cannot interrupt a thread blocked in a read, so a bounded call runs on a daemon thread
and the caller stops waiting for it at the deadline; the thread is left to the process's exit,
which does not wait for daemon threads (as pipeline/tracking/deadline.py does for MLflow).

Object transfers take a time that grows with their size, so theirs is a deadline that grows
too: ``TRAINPIPE_AWS_DEADLINE_S`` (the floor: connect, retries, back-off, the answer) plus the
object's bytes at ``TRAINPIPE_AWS_MIN_RATE_KIB_S`` (128 KiB/s unless set; DEFAULT_MIN_RATE_KIB_S says why).
It bounds ``put_object`` and ``upload_part`` (by their body's size), ``get_object``'s body (by
its Content-Length, from the call's start), and ``upload_file``/``download_file``, which are
trainpipe's own here rather than boto3's transfer manager: its worker threads are not daemon
threads, so one stuck on a trickling read would keep the process from exiting. A download is
written beside its target under a hidden ``.trainpipe-partial`` name and renamed only once
whole, and removed on any failure; an upload over MULTIPART_THRESHOLD goes in parts that are
aborted on failure. An S3 object appears only when its PUT (or its multipart upload) completes,
so an upload that misses its deadline leaves no half-written object. Server-side copies
(``copy_object``, ``upload_part_copy``) keep only the per-read timeout: their time depends on a
size this side never sees.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from botocore.response import StreamingBody

from pipeline.errors import UserError

CONNECT_TIMEOUT_S = 10  # a TCP/TLS connect to an AWS endpoint takes well under a second
READ_TIMEOUT_S = 60  # per socket read: a silent connection is dead after this long
MAX_ATTEMPTS = 5  # in all, the first try included; standard mode backs off between them
DEADLINE_ENV = "TRAINPIPE_AWS_DEADLINE_S"
DEFAULT_DEADLINE_S = 120.0  # a control-plane call answers in seconds; this allows retries and back-off
MIN_RATE_ENV = "TRAINPIPE_AWS_MIN_RATE_KIB_S"
# 128 KiB/s is 1 Mbit/s: below the slowest uplink still sold (ADSL's ~1 Mbit/s) and about a
# tenth of a typical home upload, so a working link never meets it, while a link that
# trickles (a stalled proxy, a dying connection that still answers each read) is ended in
# time that grows with the object: a 100 MiB code bundle or model gets 120 s + 800 s.
DEFAULT_MIN_RATE_KIB_S = 128.0
MULTIPART_THRESHOLD = 4 << 30  # S3 takes up to 5 GiB in one PUT, whose ETag stays the MD5
PART_SIZE = 64 << 20  # S3's parts are 5 MiB to 5 GiB, at most 10,000 of them
MAX_PARTS = 10_000
CHUNK_SIZE = 1 << 20  # what a download reads (and writes) at a time
PARTIAL_SUFFIX = ".trainpipe-partial"

CONFIG = Config(
    connect_timeout=CONNECT_TIMEOUT_S,
    read_timeout=READ_TIMEOUT_S,
    # total_max_attempts counts the first try; botocore's max_attempts counts only the retries.
    retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    user_agent_extra="trainpipe",
)

# Calls whose duration grows with the bytes they move: see the module's docstring.
UPLOADS = frozenset({"put_object", "upload_part"})
SERVER_SIDE_COPIES = frozenset({"upload_part_copy", "copy_object"})

T = TypeVar("T")


class AwsDeadlineExceeded(BotoCoreError):
    """An API call (retries included) got no complete answer by its deadline.

    A BotoCoreError, so every place that already turns botocore's failures into one line (the
    cloud commands' ``aws_errors``, the local store's ``StorageError``) says this one too."""

    fmt = ("{operation} ({service} at {endpoint}) got no complete answer within {limit:g} s "
           "(" + DEADLINE_ENV + "): check the network and the endpoint (AWS_ENDPOINT_URL, "
           "--s3-endpoint), or raise " + DEADLINE_ENV)


class TransferDeadlineExceeded(BotoCoreError):
    """An object transfer (retries included) did not complete by its size's deadline."""

    fmt = ("{operation} of s3://{bucket}/{key} ({size}, s3 at {endpoint}) did not complete within "
           "{limit:.0f} s: " + DEADLINE_ENV + " ({floor:g} s) plus {size} at {rate:g} KiB/s "
           "(" + MIN_RATE_ENV + "): check the network and the endpoint (AWS_ENDPOINT_URL, "
           "--s3-endpoint), or lower " + MIN_RATE_ENV + " for a slower link")


def _positive(environ: Mapping[str, str], name: str, default: float, unit: str) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):  # also NaN
        raise UserError(f"{name}={raw!r} is not a positive number of {unit}; set it to one "
                        f"(e.g. {name}={default:g}) or unset it")
    return value


def deadline_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``TRAINPIPE_AWS_DEADLINE_S`` (a positive number of seconds), else 120 s."""
    return _positive(environ, DEADLINE_ENV, DEFAULT_DEADLINE_S, "seconds")


def min_rate_kib_s(environ: Mapping[str, str] = os.environ) -> float:
    """``TRAINPIPE_AWS_MIN_RATE_KIB_S`` (a positive number of KiB/s), else 128."""
    return _positive(environ, MIN_RATE_ENV, DEFAULT_MIN_RATE_KIB_S, "KiB/s")


def transfer_deadline(size: int, floor: float | None = None, environ: Mapping[str, str] = os.environ) -> float:
    """Seconds a transfer of ``size`` bytes may take: the floor (``TRAINPIPE_AWS_DEADLINE_S``
    when None) plus the bytes at the minimum rate."""
    floor = deadline_seconds(environ) if floor is None else floor
    return floor + size / (min_rate_kib_s(environ) * 1024)


def _size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _body_size(body) -> int:
    """Bytes a PUT's body will send (0 when it cannot be told: the floor alone bounds it)."""
    if body is None:
        return 0
    if isinstance(body, str):
        return len(body.encode())
    if isinstance(body, (bytes, bytearray, memoryview)):
        return len(body)
    try:
        return max(0, os.fstat(body.fileno()).st_size - body.tell())
    except (AttributeError, OSError, ValueError):
        return 0


def client(session, service: str, *, region: str | None = None, endpoint_url: str | None = None,
           limit: float | None = None):
    """A ``service`` client of ``session`` (a boto3.Session) with trainpipe's Config, each API
    call bounded by ``limit`` seconds (``TRAINPIPE_AWS_DEADLINE_S`` when None)."""
    made = session.client(service, region_name=region, endpoint_url=endpoint_url, config=CONFIG)
    return bounded(made, limit)


def bounded(made, limit: float | None = None):
    """``made`` (a botocore client: one of ``client()``'s, or a test's with a Stubber) with each
    API call bounded by ``limit`` seconds; an already bounded client is returned as it is."""
    if isinstance(made, BoundedClient):
        return made
    return BoundedClient(made, deadline_seconds() if limit is None else limit)


def call_by(fn: Callable[[], T], limit: float, on_miss: Callable[[], BaseException],
            name: str = "trainpipe-aws-call") -> T:
    """``fn()``'s result or exception, or ``on_miss()`` raised once ``limit`` seconds pass."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as error:  # noqa: BLE001 (handed to the caller as it was)
            outcome["error"] = error

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise on_miss()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class BoundedClient:
    """A botocore client whose API calls, and each page a paginator fetches, end by a deadline.

    Object transfers end by a deadline that grows with their size (see the module's docstring).
    Everything else (``meta``, ``exceptions``) is the client's own, so code written for a plain
    client works unchanged."""

    def __init__(self, made, limit: float):
        self._client, self.limit = made, limit

    @property
    def unbounded(self):
        """The client itself (for botocore's Stubber)."""
        return self._client

    def __getattr__(self, name: str):
        attribute = getattr(self._client, name)
        if name == "get_paginator":
            return self._paginator
        if name in SERVER_SIDE_COPIES or name not in self._client.meta.method_to_api_mapping:
            return attribute
        operation = self._client.meta.method_to_api_mapping[name]

        if name in UPLOADS:
            @functools.wraps(attribute)
            def upload(*args, **kwargs):
                size = kwargs.get("ContentLength") or _body_size(kwargs.get("Body"))
                limit = transfer_deadline(size, self.limit)
                return call_by(lambda: attribute(*args, **kwargs), limit,
                               lambda: self._transfer_missed(operation, kwargs, size, limit))

            return upload

        @functools.wraps(attribute)
        def call(*args, **kwargs):
            return call_by(lambda: attribute(*args, **kwargs), self.limit, lambda: self._missed(operation))

        return call

    def get_object(self, **kwargs):
        """GetObject: its answer's headers by the API deadline, and its body read by the
        transfer's deadline, counted from the call's start."""
        return self._get_object(kwargs, time.monotonic())

    def _get_object(self, kwargs: dict, started: float, whole: int | None = None):
        """GetObject, or (``whole``: the object's size) the rest of one begun at ``started``,
        whose headers and body get what is left of the whole object's deadline."""
        limit = self.limit
        if whole is not None:
            limit = transfer_deadline(whole, self.limit)
            left = started + limit - time.monotonic()
            if left <= 0:
                raise self._transfer_missed("GetObject", kwargs, whole, limit)
            answer = call_by(lambda: self._client.get_object(**kwargs), min(left, self.limit),
                             lambda: self._transfer_missed("GetObject", kwargs, whole, limit))
        else:
            answer = call_by(lambda: self._client.get_object(**kwargs), limit, lambda: self._missed("GetObject"))
            whole = answer.get("ContentLength") or 0
            limit = transfer_deadline(whole, self.limit)
        answer["Body"] = _DeadlineBody(answer["Body"], answer.get("ContentLength"), started + limit,
                                       lambda: self._transfer_missed("GetObject", kwargs, whole, limit))
        return answer

    def download_file(self, Bucket, Key, Filename, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        """The object into ``Filename``, whole or not at all: it is written beside it under a
        hidden partial name, renamed once complete, removed on any failure."""
        target = Path(Filename)
        partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
        # Not mkstemp, whose 0600 would outlive the rename: the file gets the umask's mode, as
        # boto3's download_file gave it. O_EXCL: a name another download holds is never shared.
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        request = {"Bucket": Bucket, "Key": Key, **(ExtraArgs or {})}
        started, whole, etag, written = time.monotonic(), None, None, 0
        try:
            with os.fdopen(descriptor, "wb") as out:
                for attempt in range(1, MAX_ATTEMPTS + 1):
                    # A body that breaks off goes on from where it stopped, as boto3's transfer
                    # manager does, all of it within the one deadline; IfMatch: the same object.
                    rest = {"Range": f"bytes={written}-", "IfMatch": etag} if written else {}
                    answer = self._get_object({**request, **rest}, started, whole)
                    if whole is None:
                        whole, etag = answer.get("ContentLength") or 0, answer.get("ETag")
                    try:
                        for chunk in answer["Body"].iter_chunks(CHUNK_SIZE):
                            out.write(chunk)
                            written += len(chunk)
                            if Callback:
                                Callback(len(chunk))
                        break
                    except (ResponseStreamingError, ReadTimeoutError, IncompleteReadError):
                        if attempt == MAX_ATTEMPTS:
                            raise
            os.replace(partial, target)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise

    def upload_file(self, Filename, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        """The file as one PUT up to MULTIPART_THRESHOLD, in parts above it; a multipart upload
        that fails (its deadline included) is aborted, so no parts are left behind."""
        size = Path(Filename).stat().st_size
        extra = dict(ExtraArgs or {})
        if size <= MULTIPART_THRESHOLD:
            with open(Filename, "rb") as body:
                self.put_object(Bucket=Bucket, Key=Key, Body=body, **extra)
        else:
            self._upload_parts(Path(Filename), Bucket, Key, size, extra)
        if Callback:
            Callback(size)

    def _upload_parts(self, path: Path, bucket: str, key: str, size: int, extra: dict) -> None:
        part_size = max(PART_SIZE, -(-size // MAX_PARTS))
        limit = transfer_deadline(size, self.limit)
        upload_id = self.create_multipart_upload(Bucket=bucket, Key=key, **extra)["UploadId"]
        given_up = threading.Event()

        def send() -> dict:
            parts = []
            with open(path, "rb") as source:
                for number in range(1, -(-size // part_size) + 1):
                    if given_up.is_set():  # the caller has stopped waiting: send nothing more
                        raise TransferDeadlineExceeded(**self._transfer_fields("UploadPart", bucket, key, size, limit))
                    answer = self._client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                                      PartNumber=number, Body=source.read(part_size))
                    parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            return parts

        try:
            parts = call_by(send, limit, lambda: self._transfer_missed(
                "UploadPart", {"Bucket": bucket, "Key": key}, size, limit))
            self.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                           MultipartUpload={"Parts": parts})
        except BaseException:
            given_up.set()
            # The failure the caller needs is the one above; parts an abort could not remove
            # cost storage until the bucket's lifecycle rule ends incomplete uploads.
            with contextlib.suppress(BotoCoreError, ClientError):
                self.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            raise

    def _transfer_fields(self, operation: str, bucket: str, key: str, size: int, limit: float) -> dict:
        return {"operation": operation, "bucket": bucket, "key": key, "size": _size_text(size),
                "endpoint": self._client.meta.endpoint_url, "limit": limit, "floor": self.limit,
                "rate": min_rate_kib_s()}

    def _transfer_missed(self, operation: str, kwargs: dict, size: int, limit: float) -> TransferDeadlineExceeded:
        return TransferDeadlineExceeded(**self._transfer_fields(
            operation, kwargs.get("Bucket", "?"), kwargs.get("Key", "?"), size, limit))

    def _missed(self, operation: str) -> AwsDeadlineExceeded:
        meta = self._client.meta
        return AwsDeadlineExceeded(operation=operation, service=meta.service_model.service_name,
                                   endpoint=meta.endpoint_url, limit=self.limit)

    def _paginator(self, operation_name: str):
        return _BoundedPaginator(self, self._client.get_paginator(operation_name),
                                 self._client.meta.method_to_api_mapping.get(operation_name, operation_name))


class _BoundedPaginator:
    """A paginator whose every page (one API call, retries included) ends by the deadline."""

    def __init__(self, owner: BoundedClient, paginator, operation: str):
        self._owner, self._paginator, self._operation = owner, paginator, operation

    def __getattr__(self, name: str):
        return getattr(self._paginator, name)

    def paginate(self, **kwargs):
        pages = iter(self._paginator.paginate(**kwargs))
        done = object()
        while True:
            page = call_by(lambda: next(pages, done), self._owner.limit,
                           lambda: self._owner._missed(self._operation))
            if page is done:
                return
            yield page


class _DeadlineBody(StreamingBody):
    """A GetObject body whose reads end by the transfer's deadline (``deadline_at``, a
    monotonic time). Its reads all go through ``read``, so ``iter_chunks`` and iteration are
    bounded too; the body it wraps still checks the length against Content-Length."""

    def __init__(self, body, content_length: int | None, deadline_at: float,
                 on_miss: Callable[[], BaseException]):
        super().__init__(body, content_length)
        self._deadline_at, self._on_miss = deadline_at, on_miss

    def read(self, amt=None):
        left = self._deadline_at - time.monotonic()
        if left <= 0:
            raise self._on_miss()
        return call_by(lambda: super(_DeadlineBody, self).read(amt), left, self._on_miss,
                       name="trainpipe-aws-read")

    def readinto(self, b):
        data = self.read(len(b))
        memoryview(b)[:len(data)] = data
        return len(data)

    def readlines(self):
        return self.read().splitlines(keepends=True)
