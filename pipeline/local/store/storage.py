"""``s3://bucket/key`` for the local runner: a directory on this machine, or S3 through boto3.

One small interface, two implementations, so the runner's code is the same either way:

- ``LocalStorage``: ``<root>/<bucket>/<key>``, the default (``<workdir>/store``). No account,
  no network. Writes are atomic (a reader never sees half an object).
- ``Boto3Storage``: any S3 API (``--s3-endpoint URL`` for moto/MinIO, or real S3).

Listing follows S3 semantics: a prefix is a string prefix of keys, not a directory (so
``s3://b/data/x`` lists ``data/x.csv`` and ``data/x/y.csv``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UserError

S3_SCHEME = "s3://"
# SageMaker: bucket names follow S3's rules (3-63 lowercase letters, digits, dots, hyphens).
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class S3UriError(UserError, ValueError):
    """A malformed ``s3://`` URI; the message names where it came from."""


class StorageError(Exception):
    """A failed storage call. ``kind`` is the SageMaker Pipelines exception type it stands for
    (``Step.THROTTLING``, ``Step.SERVICE_FAULT``) or None for a permanent error."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri, what: str = "S3 URI") -> S3Uri:
        """``s3://bucket/key`` -> S3Uri; anything else is a one-line error naming ``what``."""
        example = "expected s3://bucket/key/prefix"
        if not isinstance(uri, str) or not uri.startswith(S3_SCHEME):
            raise S3UriError(f"{what} {uri!r} is not an s3:// URI ({example})")
        bucket, _, key = uri[len(S3_SCHEME) :].partition("/")
        if not _BUCKET_RE.match(bucket) or ".." in bucket:
            raise S3UriError(
                f"{what} {uri!r}: {bucket!r} is not a valid bucket name "
                f"(3-63 lowercase letters, digits, dots and hyphens; {example})"
            )
        parts = key.split("/")
        if any(part == ".." for part in parts):
            raise S3UriError(f"{what} {uri!r}: '..' is not allowed in a key")
        # An empty segment ("a//b", a leading "/") or "." would name a different file than
        # the key on a file system (an absolute path, outside the store): refused everywhere.
        # A trailing "/" (a folder-like prefix) is fine.
        if any(part in ("", ".") for part in (parts[:-1] if key else [])):
            raise S3UriError(f"{what} {uri!r}: empty or '.' segment in the key; "
                             "remove the doubled or leading '/'")
        return cls(bucket, key)

    def __str__(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.key}"

    def child(self, relative: str) -> S3Uri:
        """The object ``relative`` below this URI taken as a folder."""
        base = self.key if not self.key or self.key.endswith("/") else self.key + "/"
        return S3Uri(self.bucket, base + relative.lstrip("/"))


def join_uri(uri: str, *parts: str) -> str:
    out = uri.rstrip("/")
    for part in parts:
        out += "/" + part.strip("/")
    return out


def md5_of_bytes(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def md5_of_file(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def local_files(path: Path) -> list[Path]:
    """What ``Storage.put_tree`` (a folder) or ``put_file`` (a file) uploads from ``path``,
    sorted. SageMaker: symlinks are not followed, as the SDK's uploads do not."""
    path = Path(path)
    if path.is_file():
        return [path]
    return [p for p in sorted(path.rglob("*")) if p.is_file() and not p.is_symlink()]


def content_digest(path: Path, length: int = 16) -> str:
    """A short hex digest of what ``local_files`` finds: relative names and bytes. Equal data
    gives an equal digest wherever it lies, so a prefix named by it is written once; changed
    data (a file added, renamed or edited) gives another."""
    path = Path(path)
    base = path if path.is_dir() else path.parent
    digest = hashlib.sha256()
    for file in local_files(path):
        digest.update(file.relative_to(base).as_posix().encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:length]


class PathEscapeError(StorageError, UserError):
    """An object key that would name a file outside the directory it belongs in."""


def contained(root: Path, relative: str, what: str) -> Path:
    """``root / relative``, refused unless the result stays inside ``root`` (an absolute
    ``relative``, ``..``, an empty or '.' segment, or a link out of ``root``)."""
    root = Path(root).resolve()
    target = (root / relative).resolve()
    parts = relative.rstrip("/").split("/")
    if relative.startswith("/") or any(p in ("", ".", "..") for p in parts) or not (
        target.is_relative_to(root) and target != root
    ):
        raise PathEscapeError(
            f"{what}: refusing to use it, it would name {target}, outside {root}; "
            "rename the object (no leading or doubled '/', no '.' or '..' segments)"
        )
    return target


class Storage(ABC):
    """The object store operations the runner needs, nothing more."""

    @abstractmethod
    def list(self, uri: str) -> list[str]:
        """Every object whose key starts with ``uri``'s key, as s3:// URIs sorted by key."""

    @abstractmethod
    def get_file(self, uri: str, path: Path) -> None:
        """Download one object to ``path`` (parents created)."""

    @abstractmethod
    def put_file(self, path: Path, uri: str) -> None: ...

    @abstractmethod
    def put_bytes(self, data: bytes, uri: str) -> None: ...

    @abstractmethod
    def exists(self, uri: str) -> bool: ...

    @abstractmethod
    def md5(self, uri: str) -> str | None:
        """MD5 hex of the object, None when absent or unknown (multipart ETag)."""

    def outside_store(self, uri: str) -> Path | None:
        """Where ``uri``'s file is when that is outside the store (a link on its way), else
        None; a remote store has no files here."""
        return None

    @abstractmethod
    def delete(self, uri: str) -> None:
        """Remove one object; absent is not an error (as S3's DeleteObject)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the objects are, for messages."""

    def read_bytes(self, uri: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="trainpipe-get-") as tmp:
            target = Path(tmp) / "object"
            self.get_file(uri, target)
            return target.read_bytes()

    def local_path(self, uri: str) -> Path | None:
        """The object's file on this machine when the store is local (for links), else None."""
        return None

    # --- helpers built on the primitives ---------------------------------------------------
    def put_bytes_if_changed(self, data: bytes, uri: str) -> bool:
        """Upload unless an identical object is already there; True when it uploaded."""
        if self.md5(uri) == md5_of_bytes(data):
            return False
        self.put_bytes(data, uri)
        return True

    def put_file_if_changed(self, path: Path, uri: str) -> bool:
        if self.md5(uri) == md5_of_file(Path(path)):
            return False
        self.put_file(path, uri)
        return True

    def put_tree(self, directory: Path, uri: str) -> list[str]:
        """Upload every regular file under ``directory`` below ``uri``, keeping relative paths.
        SageMaker: symlinks are not followed."""
        directory = Path(directory)
        uploaded = []
        for path in local_files(directory):
            target = join_uri(uri, path.relative_to(directory).as_posix())
            self.put_file(path, target)
            uploaded.append(target)
        return uploaded

    def put_tree_if_changed(self, directory: Path, uri: str) -> tuple[list[str], int]:
        """``put_tree``, skipping objects already there with the same bytes: (every object
        of the tree, how many were written)."""
        directory = Path(directory)
        objects, written = [], 0
        for path in local_files(directory):
            target = join_uri(uri, path.relative_to(directory).as_posix())
            written += self.put_file_if_changed(path, target)
            objects.append(target)
        return objects, written

    def get_tree(self, uri: str, directory: Path) -> list[Path]:
        """Download every object under ``uri`` (taken as a folder) into ``directory``."""
        prefix = uri if uri.endswith("/") else uri + "/"
        written = []
        root = Path(directory).resolve()
        for obj in self.list(prefix):
            relative = obj[len(prefix) :]
            if not relative or relative.endswith("/"):
                continue
            target = contained(root, relative, obj)
            self.get_file(obj, target)
            written.append(target)
        return written


class LocalStorage(Storage):
    """Objects as files: ``<root>/<bucket>/<key>``."""

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()

    def _path(self, uri: str) -> Path:
        s3 = S3Uri.parse(uri)
        return contained(self.root / s3.bucket, s3.key, uri) if s3.key else self.root / s3.bucket

    def describe(self) -> str:
        return f"local object store {self.root}"

    def local_path(self, uri: str) -> Path | None:
        path = self._path(uri)
        return path if path.is_file() else None

    def list(self, uri: str) -> list[str]:
        s3 = S3Uri.parse(uri)
        bucket_dir = self.root / s3.bucket
        # Walk only the folder that can hold matching keys: the prefix up to its last "/".
        folder = bucket_dir / s3.key.rpartition("/")[0]
        if not folder.is_dir():
            return []
        keys = []
        for dirpath, _dirnames, filenames in os.walk(folder):
            for name in filenames:
                if name.endswith(_PARTIAL_SUFFIX):
                    continue
                key = (Path(dirpath) / name).relative_to(bucket_dir).as_posix()
                if key.startswith(s3.key):
                    keys.append(key)
        return [f"{S3_SCHEME}{s3.bucket}/{key}" for key in sorted(keys)]

    def get_file(self, uri: str, path: Path) -> None:
        source = self._path(uri)
        if not source.is_file():
            raise StorageError(f"{uri}: no such object in the {self.describe()}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)

    def _write(self, uri: str, write) -> None:
        target = self._path(uri)
        if uri.endswith("/"):
            return  # a "folder" marker: meaningless on a file system
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + _PARTIAL_SUFFIX)
        write(partial)
        os.replace(partial, target)

    def put_file(self, path: Path, uri: str) -> None:
        self._write(uri, lambda partial: shutil.copyfile(path, partial))

    def put_bytes(self, data: bytes, uri: str) -> None:
        self._write(uri, lambda partial: partial.write_bytes(data))

    def exists(self, uri: str) -> bool:
        return self._path(uri).is_file()

    def md5(self, uri: str) -> str | None:
        path = self._path(uri)
        return md5_of_file(path) if path.is_file() else None

    def outside_store(self, uri: str) -> Path | None:
        # The bucket folder itself may be a link (keys are contained in it, not in the root):
        # reading through it is the user's choice, removing through it is not rm's.
        path = self._path(uri)
        return None if path.is_relative_to(self.root) else path

    def delete(self, uri: str) -> None:
        path = self._path(uri)
        if uri.endswith("/") or not path.is_file():
            return
        if self.outside_store(uri) is not None:
            raise PathEscapeError(f"refusing to remove {uri}: it is {path}, outside the {self.describe()}")
        path.unlink()
        # Folders left empty go too: a store listed by folder shows no ghosts of removed data.
        bucket_dir = self.root / S3Uri.parse(uri).bucket
        for parent in path.parents:
            if parent == bucket_dir or not parent.is_relative_to(bucket_dir):
                break
            try:
                parent.rmdir()
            except OSError:  # not empty (or not ours to remove): the folders above are kept
                break


_PARTIAL_SUFFIX = ".trainpipe-partial"

# botocore error codes that SageMaker Pipelines would classify as transient.
_THROTTLING_CODES = {"Throttling", "ThrottlingException", "SlowDown", "RequestLimitExceeded",
                     "TooManyRequestsException"}


class Boto3Storage(Storage):
    """Objects in S3 (or anything that speaks its API) through boto3."""

    def __init__(self, endpoint_url: str | None = None, region: str | None = None, client=None):
        if client is None:
            import boto3

            from pipeline import aws_clients

            client = aws_clients.client(boto3.Session(), "s3", region=region, endpoint_url=endpoint_url)
        self.client = client
        self.endpoint_url = endpoint_url

    def describe(self) -> str:
        return f"S3 at {self.endpoint_url}" if self.endpoint_url else "S3"

    def _call(self, uri: str, fn, *args, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            kind = ("Step.THROTTLING" if code in _THROTTLING_CODES
                    else "Step.SERVICE_FAULT" if status >= 500 else None)
            raise StorageError(f"{uri}: {code or status}: {error}", kind) from error
        except BotoCoreError as error:  # connection refused, timeouts: transient
            raise StorageError(f"{uri}: {error}", "Step.SERVICE_FAULT") from error

    def list(self, uri: str) -> list[str]:
        s3 = S3Uri.parse(uri)
        paginator = self.client.get_paginator("list_objects_v2")
        keys = []

        def collect():
            for page in paginator.paginate(Bucket=s3.bucket, Prefix=s3.key):
                keys.extend(item["Key"] for item in page.get("Contents", []))

        self._call(uri, collect)
        return [f"{S3_SCHEME}{s3.bucket}/{key}" for key in sorted(keys) if not key.endswith("/")]

    def get_file(self, uri: str, path: Path) -> None:
        # The factory's clients download whole or not at all, by a deadline that grows with
        # the object's size (pipeline/aws_transfers.py).
        s3 = S3Uri.parse(uri)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._call(uri, self.client.download_file, s3.bucket, s3.key, str(path))

    def put_file(self, path: Path, uri: str) -> None:
        from pipeline.aws_transfers import MULTIPART_THRESHOLD

        s3 = S3Uri.parse(uri)
        if Path(path).stat().st_size > MULTIPART_THRESHOLD:
            self._call(uri, self.client.upload_file, str(path), s3.bucket, s3.key)
            return
        # One PUT (not multipart), so the ETag stays the MD5 that md5() compares.
        with open(path, "rb") as body:
            self._call(uri, self.client.put_object, Bucket=s3.bucket, Key=s3.key, Body=body)

    def put_bytes(self, data: bytes, uri: str) -> None:
        s3 = S3Uri.parse(uri)
        self._call(uri, self.client.put_object, Bucket=s3.bucket, Key=s3.key, Body=data)

    def _head(self, uri: str):
        from botocore.exceptions import ClientError

        s3 = S3Uri.parse(uri)

        def head():
            try:
                return self.client.head_object(Bucket=s3.bucket, Key=s3.key)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise

        return self._call(uri, head)

    def exists(self, uri: str) -> bool:
        return self._head(uri) is not None

    def md5(self, uri: str) -> str | None:
        head = self._head(uri)
        if head is None:
            return None
        etag = head.get("ETag", "").strip('"')
        return None if "-" in etag else etag

    def delete(self, uri: str) -> None:
        s3 = S3Uri.parse(uri)
        self._call(uri, self.client.delete_object, Bucket=s3.bucket, Key=s3.key)
