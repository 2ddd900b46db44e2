"""S3 object transfers by deadlines that grow with their size: ``S3Transfers``, the part of
pipeline/aws_clients.py's BoundedClient that downloads, uploads and copies objects.

A transfer's deadline is ``transfer_deadline`` (pipeline/aws_deadlines.py): the API deadline
plus the object's bytes at the minimum rate. It bounds ``put_object`` and ``upload_part`` (by
their body's size), ``get_object``'s body (by its Content-Length, from the call's start), and
``upload_file``/``download_file``, which are trainpipe's own here rather than boto3's transfer
manager: its worker threads are not daemon threads, so one stuck on a trickling read would keep
the process from exiting. A download is written beside its target under a hidden
``.trainpipe-partial`` name and renamed only once whole, and removed on any failure; an upload
over MULTIPART_THRESHOLD goes in parts that are aborted on failure. An S3 object appears only
when its PUT (or its multipart upload) completes, so an upload that misses its deadline leaves
no half-written object. ``upload_fileobj`` and ``download_fileobj`` (what the SageMaker SDK's
S3Uploader/S3Downloader call) are trainpipe's too.

Server-side copies (``copy_object``, ``upload_part_copy``, and the managed ``copy``) move no
bytes over this side's link, but S3 answers a long CopyObject with a 200 at once and then
whitespace every few seconds until the copy is done (an error may still come in that body,
which botocore turns into a retry), so no read ever times out: their deadline too grows with
the size, which a HeadObject of the source tells (``CopySourceRange`` tells a part's), counted
from the call's start, HeadObject included. A HeadObject that fails otherwise (no permission to
head it, say) leaves the copy the floor alone, and the copy's own answer says what is wrong.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    IncompleteReadError,
    ParamValidationError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from botocore.response import StreamingBody

from pipeline.aws_deadlines import (
    MAX_ATTEMPTS,
    CopyDeadlineExceeded,
    TransferDeadlineExceeded,
    call_by,
    min_rate_kib_s,
    transfer_deadline,
)

MULTIPART_THRESHOLD = 4 << 30  # S3 takes up to 5 GiB in one PUT, whose ETag stays the MD5
PART_SIZE = 64 << 20  # S3's parts are 5 MiB to 5 GiB, at most 10,000 of them
MAX_PARTS = 10_000
CHUNK_SIZE = 1 << 20  # what a download reads (and writes) at a time
PARTIAL_SUFFIX = ".trainpipe-partial"

# Calls whose duration grows with the bytes they move: see the module's docstring.
UPLOADS = frozenset({"put_object", "upload_part"})
COPIES = {"copy_object": "CopyObject", "upload_part_copy": "UploadPartCopy"}
# The HeadObject arguments a copy's source arguments stand for (s3transfer's copies.py maps the same).
COPY_SOURCE_TO_HEAD = {
    "CopySourceIfMatch": "IfMatch", "CopySourceIfModifiedSince": "IfModifiedSince",
    "CopySourceIfNoneMatch": "IfNoneMatch", "CopySourceIfUnmodifiedSince": "IfUnmodifiedSince",
    "CopySourceSSECustomerKey": "SSECustomerKey", "CopySourceSSECustomerAlgorithm": "SSECustomerAlgorithm",
    "CopySourceSSECustomerKeyMD5": "SSECustomerKeyMD5", "RequestPayer": "RequestPayer",
    "ExpectedSourceBucketOwner": "ExpectedBucketOwner",
}
# A multipart copy's parts take the source's and the target's encryption arguments; its
# CreateMultipartUpload takes everything else but the source's.
PART_COPY_ARGS = frozenset({*COPY_SOURCE_TO_HEAD, "SSECustomerKey", "SSECustomerAlgorithm", "SSECustomerKeyMD5",
                            "ExpectedBucketOwner"})
NOT_FOR_CREATE = frozenset({*COPY_SOURCE_TO_HEAD, "MetadataDirective", "TaggingDirective", "Tagging",
                            "ExpectedSourceBucketOwner"}) - {"RequestPayer"}
COMPLETE_ARGS = frozenset({"SSECustomerKey", "SSECustomerAlgorithm", "SSECustomerKeyMD5", "RequestPayer",
                           "ExpectedBucketOwner"})
# What a multipart copy carries over from the source, as CopyObject does (MetadataDirective COPY).
PRESERVED_METADATA = ("CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage", "ContentType",
                      "Expires", "Metadata")


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
        pass
    try:  # a seekable stream with no file behind it (io.BytesIO: what the SDK uploads bytes from)
        here = body.tell()
        end = body.seek(0, os.SEEK_END)
        body.seek(here)
        return max(0, end - here)
    except (AttributeError, OSError, ValueError):
        return 0


def _source_text(source) -> str:
    if isinstance(source, Mapping):
        version = f"?versionId={source['VersionId']}" if source.get("VersionId") else ""
        return f"s3://{source.get('Bucket', '?')}/{source.get('Key', '?')}{version}"
    return f"s3://{str(source).lstrip('/')}"


def _source_object(source) -> dict:
    """HeadObject's Bucket, Key (and VersionId) for a copy's ``CopySource``: a dict, or the
    string ``bucket/key[?versionId=...]`` (an access point's ``arn.../object/key``)."""
    if isinstance(source, Mapping):
        return {name: source[name] for name in ("Bucket", "Key", "VersionId") if source.get(name)}
    text, _, version = str(source).lstrip("/").partition("?versionId=")
    bucket, separator, key = text.partition("/object/") if text.startswith("arn:") else text.partition("/")
    if not (bucket and separator and key):
        raise ValueError(f"CopySource {source!r} names no bucket and key")
    return {"Bucket": bucket, "Key": key, **({"VersionId": version} if version else {})}


def _head_args(kwargs: Mapping) -> dict:
    """The HeadObject arguments a copy's source arguments (``CopySourceIfMatch``, ...) stand for."""
    return {COPY_SOURCE_TO_HEAD[name]: value for name, value in kwargs.items() if name in COPY_SOURCE_TO_HEAD}


def _range_size(text: str | None) -> int | None:
    """The bytes ``bytes=first-last`` names, None for no range (or one that names none)."""
    first, _, last = (text or "").removeprefix("bytes=").partition("-")
    try:
        return max(0, int(last) - int(first) + 1)
    except ValueError:
        return None


class S3Transfers:
    """The object transfers of a bounded client (pipeline/aws_clients.py's BoundedClient, which
    inherits them): each ends by the deadline of the bytes it moves.

    Its host gives it ``_client`` (the botocore client), ``limit`` (the API deadline, the
    transfers' floor), ``_missed(operation)`` (an API call's miss) and ``_bounded(client)``
    (another client, bounded as the host is), and bounds its other API calls itself."""

    def _sized_call(self, name: str, operation: str, attribute):
        """``attribute`` (the client's ``name``, API ``operation``) by the deadline of the bytes
        it moves when it is a server-side copy or an upload; None for any other call."""
        if name in COPIES:
            @functools.wraps(attribute)
            def server_side_copy(*args, **kwargs):
                if args:  # botocore's own TypeError: its API methods take keywords only
                    return attribute(*args, **kwargs)
                return self._copy_call(name, attribute, kwargs)

            return server_side_copy

        if name in UPLOADS:
            @functools.wraps(attribute)
            def upload(*args, **kwargs):
                size = kwargs.get("ContentLength") or _body_size(kwargs.get("Body"))
                limit = transfer_deadline(size, self.limit)
                return call_by(lambda: attribute(*args, **kwargs), limit,
                               lambda: self._transfer_missed(operation, kwargs, size, limit))

            return upload

        return None

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
        try:
            with os.fdopen(descriptor, "wb") as out:
                self._download_into(out, {"Bucket": Bucket, "Key": Key, **(ExtraArgs or {})}, Callback)
            os.replace(partial, target)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise

    def download_fileobj(self, Bucket, Key, Fileobj, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        """The object written into ``Fileobj`` (what the SDK's S3Downloader reads bytes with)."""
        self._download_into(Fileobj, {"Bucket": Bucket, "Key": Key, **(ExtraArgs or {})}, Callback)

    def _download_into(self, out, request: dict, callback) -> None:
        started, whole, etag, written = time.monotonic(), None, None, 0
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
                    if callback:
                        callback(len(chunk))
                return
            except (ResponseStreamingError, ReadTimeoutError, IncompleteReadError):
                if attempt == MAX_ATTEMPTS:
                    raise

    def upload_file(self, Filename, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        """The file as one PUT up to MULTIPART_THRESHOLD, in parts above it; a multipart upload
        that fails (its deadline included) is aborted, so no parts are left behind."""
        with open(Filename, "rb") as body:
            size = os.fstat(body.fileno()).st_size
            self._upload(body, size, Bucket, Key, dict(ExtraArgs or {}))
        if Callback:
            Callback(size)

    def upload_fileobj(self, Fileobj, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        """What ``Fileobj`` holds from where it stands, as ``upload_file`` sends a file (what
        the SDK's S3Uploader sends bytes with). A stream that cannot seek, or stands past its
        start, is copied to a temporary file first: a retry sends the body again from its start."""
        try:
            seekable = Fileobj.tell() == 0 and Fileobj.seekable()
        except (AttributeError, OSError, ValueError):
            seekable = False
        if seekable:
            size = _body_size(Fileobj)
            self._upload(Fileobj, size, Bucket, Key, dict(ExtraArgs or {}))
        else:
            with tempfile.TemporaryFile() as spool:
                while chunk := Fileobj.read(CHUNK_SIZE):
                    spool.write(chunk)
                size = spool.tell()
                spool.seek(0)
                self._upload(spool, size, Bucket, Key, dict(ExtraArgs or {}))
        if Callback:
            Callback(size)

    def _upload(self, body, size: int, bucket: str, key: str, extra: dict) -> None:
        if size <= MULTIPART_THRESHOLD:
            self.put_object(Bucket=bucket, Key=key, Body=body, **extra)
        else:
            self._upload_parts(body, bucket, key, size, extra)

    def _upload_parts(self, source, bucket: str, key: str, size: int, extra: dict) -> None:
        part_size = max(PART_SIZE, -(-size // MAX_PARTS))
        limit = transfer_deadline(size, self.limit)
        upload_id = self.create_multipart_upload(Bucket=bucket, Key=key, **extra)["UploadId"]
        given_up = threading.Event()

        def send() -> dict:
            parts = []
            for number in range(1, -(-size // part_size) + 1):
                if given_up.is_set():  # the caller has stopped waiting: send nothing more
                    raise TransferDeadlineExceeded(**self._transfer_fields("UploadPart", bucket, key, size, limit))
                answer = self._client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                                  PartNumber=number, Body=source.read(part_size))
                parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            return parts

        self._in_parts(send, bucket, key, upload_id, given_up, {}, lambda: self._transfer_missed(
            "UploadPart", {"Bucket": bucket, "Key": key}, size, limit), limit)

    def _in_parts(self, send, bucket: str, key: str, upload_id: str, given_up: threading.Event, complete: dict,
                  on_miss, limit: float) -> None:
        """``send()``'s parts (by ``limit`` seconds from now) completed as one object, or the
        multipart upload aborted."""
        try:
            parts = call_by(send, limit, on_miss)
            self.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                           MultipartUpload={"Parts": parts}, **complete)
        except BaseException:
            given_up.set()
            # The failure the caller needs is the one above; parts an abort could not remove
            # cost storage until the bucket's lifecycle rule ends incomplete uploads.
            with contextlib.suppress(BotoCoreError, ClientError):
                self.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            raise

    # --- server-side copies: see the module's docstring --------------------------------------
    def _copy_call(self, name: str, attribute, kwargs: dict, started: float | None = None,
                   size: int | None = None):
        """CopyObject or UploadPartCopy by the deadline of the bytes it copies, counted from
        ``started`` (now when None), a HeadObject of the source for their number included."""
        started = time.monotonic() if started is None else started
        if size is None and name == "upload_part_copy":
            size = _range_size(kwargs.get("CopySourceRange"))
        if size is None:
            size = self._source_size(self, kwargs.get("CopySource"), kwargs)
        limit = transfer_deadline(size, self.limit)

        def missed() -> BaseException:
            return self._copy_missed(COPIES[name], kwargs, size, limit)

        left = started + limit - time.monotonic()
        if left <= 0:
            raise missed()
        return call_by(lambda: attribute(**kwargs), left, missed)

    def _source_size(self, source_client, source, kwargs: dict) -> int:
        """The copy source's size, or 0 (the floor alone) when a HeadObject of it fails, for
        the copy itself to say why; a HeadObject that misses its own deadline says so."""
        try:
            head = {**_source_object(source), **_head_args(kwargs)}
        except (KeyError, TypeError, ValueError):
            return 0  # botocore's validation of the copy's arguments says what is wrong
        try:
            return source_client.head_object(**head).get("ContentLength") or 0
        except (ClientError, ParamValidationError):
            return 0

    def copy(self, CopySource, Bucket, Key, ExtraArgs=None, Callback=None, SourceClient=None, Config=None):  # noqa: N803 (boto3's names)
        """boto3's managed copy, by the deadline of the source's size: one CopyObject up to
        MULTIPART_THRESHOLD (S3 takes up to 5 GiB), UploadPartCopy parts above it, aborted on
        failure. A part copy keeps the source's metadata (or ``ExtraArgs``' with
        ``MetadataDirective: REPLACE``) as boto3's does; like boto3 before s3transfer 0.11, it
        does not carry the source's tags over."""
        started = time.monotonic()
        extra = dict(ExtraArgs or {})
        source_client = self._bounded(SourceClient) if SourceClient is not None else self
        head = source_client.head_object(**_source_object(CopySource), **_head_args(extra))
        size = head.get("ContentLength") or 0
        if size <= MULTIPART_THRESHOLD:
            self._copy_call("copy_object", self._client.copy_object,
                            {"CopySource": CopySource, "Bucket": Bucket, "Key": Key, **extra}, started, size)
        else:
            self._copy_parts(CopySource, Bucket, Key, size, extra, head, started)
        if Callback:
            Callback(size)

    def _copy_parts(self, source, bucket: str, key: str, size: int, extra: dict, head: dict,
                    started: float) -> None:
        part_size = max(PART_SIZE, -(-size // MAX_PARTS))
        limit = transfer_deadline(size, self.limit)
        create = {name: value for name, value in extra.items() if name not in NOT_FOR_CREATE}
        if extra.get("MetadataDirective") != "REPLACE":  # a multipart upload has no MetadataDirective
            create = {name: value for name, value in create.items() if name not in PRESERVED_METADATA}
            create.update({name: head[name] for name in PRESERVED_METADATA if name in head})
        part_args = {name: value for name, value in extra.items() if name in PART_COPY_ARGS}
        upload_id = self.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"]
        given_up = threading.Event()

        def missed() -> BaseException:
            return self._copy_missed("UploadPartCopy", {"CopySource": source, "Bucket": bucket, "Key": key},
                                     size, limit)

        def send() -> list:
            parts = []
            for number, first in enumerate(range(0, size, part_size), 1):
                if given_up.is_set():  # the caller has stopped waiting: copy nothing more
                    raise missed()
                answer = self._client.upload_part_copy(
                    Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, CopySource=source,
                    CopySourceRange=f"bytes={first}-{min(first + part_size, size) - 1}", **part_args)
                parts.append({"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]})
            return parts

        left = started + limit - time.monotonic()
        complete = {name: value for name, value in extra.items() if name in COMPLETE_ARGS}
        self._in_parts(send, bucket, key, upload_id, given_up, complete, missed, max(left, 0.0))

    def _copy_missed(self, operation: str, kwargs: dict, size: int, limit: float) -> CopyDeadlineExceeded:
        return CopyDeadlineExceeded(source=_source_text(kwargs.get("CopySource", "?")), **self._transfer_fields(
            operation, kwargs.get("Bucket", "?"), kwargs.get("Key", "?"), size, limit))

    def _transfer_fields(self, operation: str, bucket: str, key: str, size: int, limit: float) -> dict:
        return {"operation": operation, "bucket": bucket, "key": key, "size": _size_text(size),
                "endpoint": self._client.meta.endpoint_url, "limit": limit, "floor": self.limit,
                "rate": min_rate_kib_s()}

    def _transfer_missed(self, operation: str, kwargs: dict, size: int, limit: float) -> TransferDeadlineExceeded:
        return TransferDeadlineExceeded(**self._transfer_fields(
            operation, kwargs.get("Bucket", "?"), kwargs.get("Key", "?"), size, limit))


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
