"""pipeline/aws_transfers.py: object uploads and downloads end by a deadline that grows with their
size (TRAINPIPE_AWS_DEADLINE_S plus the bytes at TRAINPIPE_AWS_MIN_RATE_KIB_S), and leave nothing
half-written.

Driven as a user meets it: ``trainpipe store cp`` against moto on 127.0.0.1, straight (the
transfer completes whole, under a floor far above any scheduling stall) and behind a proxy whose headers pass at once and
whose bodies trickle one byte every 0.2 s, so every call's headers answer in time, every socket
read succeeds, and only the transfer's own deadline can end it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import urllib.parse

import boto3
import pytest

from pipeline import aws_clients, aws_transfers
from pipeline.cli.main import main
from pipeline.errors import UserError
from pipeline.local.store.s3_endpoint import endpoint_client
from tests import readme_record
from tests.moto_aws import REGION
from tests.pipeline.cloud.test_aws_deadlines import GENEROUS_S, _Server, trickle_proxy

BUCKET = "transfers"
SIZE = 64 << 10  # at 64 KiB/s: the floor plus 1 s for the bytes
# Each call's floor (TRAINPIPE_AWS_DEADLINE_S). The calls before a trickled transfer (HeadObject,
# CreateMultipartUpload) pass the proxy at once but must still answer within it; CI's loaded
# 2 cores once took over 1 s for a HeadObject to moto, so the floor is well above that.
FLOOR_S = 4
# Through the proxy the body alone takes 64 Ki x 0.2 s, about 3.6 hours; straight to moto, ms.


@pytest.fixture
def s3(aws, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    client = boto3.client("s3", region_name=REGION, endpoint_url=aws)
    client.create_bucket(Bucket=BUCKET)
    monkeypatch.setenv(aws_clients.DEADLINE_ENV, str(FLOOR_S))
    monkeypatch.setenv(aws_clients.MIN_RATE_ENV, "64")
    return client


@contextlib.contextmanager
def _unhurried():
    """Straight to moto, a transfer completes in ms on an idle machine but may not within the
    floor on a loaded one (CI read 1 s for a 64 KiB GetObject). The straight calls show the path
    works whole, not that it is fast, so they run with a floor far above any scheduling stall."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(aws_clients.DEADLINE_ENV, str(GENEROUS_S))
        yield


def _deadline_message(operation: str, endpoint: str) -> str:
    return (f"{operation} of s3://{BUCKET}/model.bin (64.0 KiB, s3 at {endpoint}) did not complete within {FLOOR_S + 1} s: "
            f"TRAINPIPE_AWS_DEADLINE_S ({FLOOR_S} s) plus 64.0 KiB at 64 KiB/s (TRAINPIPE_AWS_MIN_RATE_KIB_S): check the "
            "network and the endpoint (AWS_ENDPOINT_URL, --s3-endpoint), or lower TRAINPIPE_AWS_MIN_RATE_KIB_S "
            "for a slower link")


def test_a_trickled_download_ends_by_its_deadline_and_leaves_the_old_file_alone(s3, aws, tmp_path, capsys):
    data = os.urandom(SIZE)
    s3.put_object(Bucket=BUCKET, Key="model.bin", Body=data)
    # Straight to moto the download comes through, whole.
    with _unhurried():
        assert main(["store", "cp", f"s3://{BUCKET}/model.bin", str(tmp_path / "fresh.bin"),
                     "--s3-endpoint", aws]) == 0
    assert (tmp_path / "fresh.bin").read_bytes() == data
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "fresh.bin").stat().st_mode & 0o777 == 0o666 & ~umask  # as any file it writes

    (tmp_path / "model.bin").write_bytes(b"the previous model")
    capsys.readouterr()
    proxy = trickle_proxy(aws, bodies_only=True)
    try:
        started = time.monotonic()
        code = main(["store", "cp", f"s3://{BUCKET}/model.bin", str(tmp_path / "model.bin"),
                     "--s3-endpoint", proxy.url])
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    err = capsys.readouterr().err.strip()
    readme_record.record(err)
    assert code == 2
    assert err == (f"trainpipe store: error: cannot use the S3 at {proxy.url}: s3://{BUCKET}/model.bin: "
                   + _deadline_message("GetObject", proxy.url)), err
    assert elapsed < GENEROUS_S
    # Nothing half-written: the file where the download would go is the one that was there,
    # and no partial is left beside it.
    assert (tmp_path / "model.bin").read_bytes() == b"the previous model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.bin", "model.bin"]


def test_a_trickled_upload_ends_by_its_deadline_and_writes_no_object(s3, aws, tmp_path, capsys):
    (tmp_path / "model.bin").write_bytes(os.urandom(SIZE))
    proxy = trickle_proxy(aws, bodies_only=True, requests=True)
    try:
        started = time.monotonic()
        code = main(["store", "cp", str(tmp_path / "model.bin"), f"s3://{BUCKET}/model.bin",
                     "--s3-endpoint", proxy.url])
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    err = capsys.readouterr().err.strip()
    readme_record.record(err)
    assert code == 2
    assert err == (f"trainpipe store: error: cannot use the S3 at {proxy.url}: s3://{BUCKET}/model.bin: "
                   + _deadline_message("PutObject", proxy.url)), err
    assert elapsed < GENEROUS_S
    # S3 (and moto) keep an object only once its PUT is whole.
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
    # Straight to moto it comes through.
    with _unhurried():
        assert main(["store", "cp", str(tmp_path / "model.bin"), f"s3://{BUCKET}/model.bin",
                     "--s3-endpoint", aws]) == 0
    assert s3.get_object(Bucket=BUCKET, Key="model.bin")["Body"].read() == (tmp_path / "model.bin").read_bytes()


def test_a_multipart_upload_that_misses_its_deadline_is_aborted(s3, aws, tmp_path, monkeypatch):
    """Above MULTIPART_THRESHOLD the file goes in parts; a miss aborts the upload, so no parts
    are left behind (S3 parts are 5 MiB at least, so this one is 6 MiB in two)."""
    monkeypatch.setattr(aws_transfers, "MULTIPART_THRESHOLD", 1 << 20)
    monkeypatch.setattr(aws_transfers, "PART_SIZE", 5 << 20)
    monkeypatch.setenv(aws_clients.MIN_RATE_ENV, str(6 << 10))  # 6 MiB at 6 MiB/s: the floor plus 1 s
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(6 << 20))
    proxy = trickle_proxy(aws, delay=0.001, bodies_only=True, requests=True)
    try:
        client = endpoint_client(proxy.url, REGION)
        with pytest.raises(aws_clients.TransferDeadlineExceeded, match="UploadPart of s3://transfers/model.bin"):
            client.upload_file(str(path), BUCKET, "model.bin")
    finally:
        proxy.close()
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
    # Straight to moto: two parts, one object, whole.
    with _unhurried():
        endpoint_client(aws, REGION).upload_file(str(path), BUCKET, "model.bin")
    assert s3.get_object(Bucket=BUCKET, Key="model.bin")["Body"].read() == path.read_bytes()


def test_the_deadline_grows_with_the_size_and_a_bad_rate_is_refused(monkeypatch):
    monkeypatch.delenv(aws_clients.DEADLINE_ENV, raising=False)
    monkeypatch.delenv(aws_clients.MIN_RATE_ENV, raising=False)
    assert aws_clients.transfer_deadline(0) == 120
    assert aws_clients.transfer_deadline(100 << 20) == 120 + 800  # 100 MiB at 128 KiB/s
    monkeypatch.setenv(aws_clients.MIN_RATE_ENV, "0")
    with pytest.raises(UserError) as raised:
        aws_clients.transfer_deadline(1)
    assert str(raised.value) == ("TRAINPIPE_AWS_MIN_RATE_KIB_S='0' is not a positive number of KiB/s; set it to "
                                 "one (e.g. TRAINPIPE_AWS_MIN_RATE_KIB_S=128) or unset it")


def _cut_once_proxy(upstream: str, after: int) -> _Server:
    """Forwards to ``upstream``; the first connection is closed once ``after`` bytes of answers
    have passed (a body that breaks off, as a reset connection does), the others run whole."""
    target = urllib.parse.urlsplit(upstream)
    first = threading.Lock()

    def serve(server: _Server, conn: socket.socket) -> None:
        cut = first.acquire(blocking=False)
        upstream_conn = socket.create_connection((target.hostname, target.port))
        server.connections.append(upstream_conn)

        def forward(source: socket.socket, sink: socket.socket, budget: float) -> None:
            try:
                while budget > 0 and (data := source.recv(65536)):
                    sink.sendall(data[:int(min(budget, len(data)))])
                    budget -= len(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    # shutdown first: a close alone sends no FIN while the other direction's
                    # thread is still in recv on the same socket.
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)
                    end.close()

        threading.Thread(target=forward, args=(conn, upstream_conn, float("inf")), daemon=True).start()
        forward(upstream_conn, conn, after if cut else float("inf"))

    return _Server(serve)


def test_a_download_whose_body_breaks_off_goes_on_from_where_it_stopped(s3, aws, tmp_path):
    data = os.urandom(SIZE * 4)
    s3.put_object(Bucket=BUCKET, Key="model.bin", Body=data)
    proxy = _cut_once_proxy(aws, after=SIZE)  # about a quarter of the body, then the connection closes
    try:
        with _unhurried():  # what is shown is the resume, not a deadline
            endpoint_client(proxy.url, REGION).download_file(BUCKET, "model.bin", str(tmp_path / "model.bin"))
    finally:
        proxy.close()
    assert (tmp_path / "model.bin").read_bytes() == data
    assert len(proxy.connections) == 4  # two connections, each with its own upstream: the cut one, the rest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]


def _copy_deadline_message(operation: str, endpoint: str) -> str:
    return (f"{operation} of s3://{BUCKET}/model.bin to s3://{BUCKET}/copy.bin (64.0 KiB, s3 at {endpoint}) did not "
            f"complete within {FLOOR_S + 1} s: TRAINPIPE_AWS_DEADLINE_S ({FLOOR_S} s) plus 64.0 KiB at 64 KiB/s "
            "(TRAINPIPE_AWS_MIN_RATE_KIB_S): check the endpoint (AWS_ENDPOINT_URL, --s3-endpoint), or lower "
            "TRAINPIPE_AWS_MIN_RATE_KIB_S for a slower S3")


@pytest.mark.parametrize("call", ["copy_object", "copy"])
def test_a_server_side_copy_ends_by_the_deadline_of_its_sources_size(s3, aws, call):
    """S3 answers a long CopyObject with a 200 at once and then whitespace until the copy is
    done: its headers come in time and each read succeeds. The proxy's trickled answer body
    stands for that; only the copy's own deadline (from a HeadObject of its source) ends it."""
    data = os.urandom(SIZE)
    s3.put_object(Bucket=BUCKET, Key="model.bin", Body=data)

    def copy(client) -> None:
        if call == "copy_object":
            client.copy_object(CopySource=f"{BUCKET}/model.bin", Bucket=BUCKET, Key="copy.bin")
        else:
            client.copy({"Bucket": BUCKET, "Key": "model.bin"}, BUCKET, "copy.bin")

    proxy = trickle_proxy(aws, bodies_only=True)
    try:
        started = time.monotonic()
        with pytest.raises(aws_clients.CopyDeadlineExceeded) as raised:
            copy(endpoint_client(proxy.url, REGION))
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    readme_record.record(str(raised.value))
    assert str(raised.value) == _copy_deadline_message("CopyObject", proxy.url)
    assert elapsed < GENEROUS_S  # the answer's ~230 bytes alone take ~46 s through the proxy
    # Straight to moto it comes through.
    with _unhurried():
        copy(endpoint_client(aws, REGION))
    assert s3.get_object(Bucket=BUCKET, Key="copy.bin")["Body"].read() == data


def test_a_part_copy_is_bounded_by_its_range_and_a_multipart_copy_that_misses_is_aborted(s3, aws, monkeypatch):
    """UploadPartCopy's size is its CopySourceRange's; the managed copy above
    MULTIPART_THRESHOLD copies in parts, and a miss aborts the upload (parts are 5 MiB at
    least, so the source is 6 MiB in two). Only the part copies' answers trickle."""
    monkeypatch.setattr(aws_transfers, "MULTIPART_THRESHOLD", 1 << 20)
    monkeypatch.setattr(aws_transfers, "PART_SIZE", 5 << 20)
    data = os.urandom(6 << 20)
    s3.put_object(Bucket=BUCKET, Key="model.bin", Body=data, ContentType="application/x-model")
    proxy = trickle_proxy(aws, bodies_only=True, only=lambda line: line.startswith(b"PUT ") and b"partNumber=" in line)
    try:
        client = endpoint_client(proxy.url, REGION)
        upload_id = client.create_multipart_upload(Bucket=BUCKET, Key="copy.bin")["UploadId"]
        with pytest.raises(aws_clients.CopyDeadlineExceeded) as raised:
            client.upload_part_copy(CopySource=f"{BUCKET}/model.bin", CopySourceRange=f"bytes=0-{SIZE - 1}",
                                    Bucket=BUCKET, Key="copy.bin", UploadId=upload_id, PartNumber=1)
        assert str(raised.value) == _copy_deadline_message("UploadPartCopy", proxy.url)
        client.abort_multipart_upload(Bucket=BUCKET, Key="copy.bin", UploadId=upload_id)

        monkeypatch.setenv(aws_clients.MIN_RATE_ENV, str(6 << 10))  # 6 MiB at 6 MiB/s: the floor plus 1 s
        with pytest.raises(aws_clients.CopyDeadlineExceeded, match=f"UploadPartCopy of s3://{BUCKET}/model.bin"):
            client.copy({"Bucket": BUCKET, "Key": "model.bin"}, BUCKET, "copy.bin")
    finally:
        proxy.close()
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["model.bin"]
    # Straight to moto: two parts, one object, whole, with the source's metadata.
    with _unhurried():
        endpoint_client(aws, REGION).copy({"Bucket": BUCKET, "Key": "model.bin"}, BUCKET, "copy.bin")
    copied = s3.get_object(Bucket=BUCKET, Key="copy.bin")
    assert copied["Body"].read() == data
    assert copied["ContentType"] == "application/x-model"


def test_fileobj_transfers_are_trainpipes_own_and_bounded(s3, aws):
    """upload_fileobj/download_fileobj (the SDK's S3Uploader and S3Downloader) go through the
    bounded PUT and GET, not boto3's transfer manager, whose threads would outlive a deadline."""
    import io

    data = os.urandom(SIZE)
    with _unhurried():
        endpoint_client(aws, REGION).upload_fileobj(io.BytesIO(data), BUCKET, "model.bin")
    assert s3.get_object(Bucket=BUCKET, Key="model.bin")["Body"].read() == data
    proxy = trickle_proxy(aws, bodies_only=True)
    try:
        with pytest.raises(aws_clients.TransferDeadlineExceeded) as raised:
            endpoint_client(proxy.url, REGION).download_fileobj(BUCKET, "model.bin", io.BytesIO())
    finally:
        proxy.close()
    assert str(raised.value) == _deadline_message("GetObject", proxy.url)
    proxy = trickle_proxy(aws, bodies_only=True, requests=True)
    try:
        with pytest.raises(aws_clients.TransferDeadlineExceeded) as raised:
            endpoint_client(proxy.url, REGION).upload_fileobj(io.BytesIO(os.urandom(SIZE)), BUCKET, "model.bin")
    finally:
        proxy.close()
    assert str(raised.value) == _deadline_message("PutObject", proxy.url)  # its size known: the floor plus 1 s
    out = io.BytesIO()
    with _unhurried():
        endpoint_client(aws, REGION).download_fileobj(BUCKET, "model.bin", out)
    assert out.getvalue() == data
