"""pipeline/aws_clients.py: every boto3 client has explicit connect/read timeouts and bounded
retries, and each API call ends by TRAINPIPE_AWS_DEADLINE_S as a whole.

Driven as a user meets it: the real CLI against moto on 127.0.0.1, then against the same moto
behind a proxy that trickles every answer back one byte at a time (each socket read succeeds,
so botocore's read timeout never trips), and the local store against an endpoint that accepts
connections and never answers.
"""

from __future__ import annotations

import collections
import json
import os
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from pipeline import aws_clients
from pipeline.cli.main import main
from pipeline.cloud.aws import Clients
from pipeline.costs.prices import pricing_client
from pipeline.local.store.s3_endpoint import endpoint_client
from pipeline.local.store.storage import Boto3Storage, StorageError
from tests import readme_record
from tests.moto_aws import REGION

REPO_ROOT = Path(__file__).resolve().parents[3]
GENEROUS_S = 60  # far above the 1 s deadline; only a call that ignores it takes this long


class _Server:
    """A TCP server on 127.0.0.1 that hands each connection to ``serve`` on its own thread."""

    def __init__(self, serve):
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self._serve = serve
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(self, conn), daemon=True).start()

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
        for conn in self.connections:
            conn.close()


def _silent(server: _Server, conn: socket.socket) -> None:
    """Reads the request and never answers."""
    while not server.stopped.wait(0.1):
        pass


# How an HTTP/1.1 message's first bytes read: an answer, or one of the requests boto3 makes.
_MESSAGE_STARTS = (b"HTTP/", b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ")


def trickle_proxy(upstream: str, delay: float = 0.2, *, bodies_only: bool = False,
                  requests: bool = False, only: Callable[[bytes], bool] | None = None) -> _Server:
    """Forwards to ``upstream``; its answers come back one byte every ``delay`` seconds.

    ``bodies_only``: each message's headers pass at once and only its body trickles, so a call's
    headers answer in time and only a transfer's own deadline can end it. ``requests``: what is
    sent trickles too (an upload over a link that barely moves). ``only``: just the answers to
    requests whose first line it accepts trickle; the others pass at once (a connection's
    answers come in the order of its requests)."""
    target = urllib.parse.urlsplit(upstream)

    def pump(server: _Server, source: socket.socket, sink: socket.socket, pause: float,
             asked: collections.deque, answering: bool) -> None:
        slow = True
        try:
            while not server.stopped.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if only is not None and data.startswith(_MESSAGE_STARTS):
                    if answering:
                        slow = asked.popleft() if asked else True
                    else:
                        asked.append(only(data.split(b"\r\n", 1)[0]))
                if not slow:
                    sink.sendall(data)
                    continue
                if bodies_only and data.startswith(_MESSAGE_STARTS):
                    end = data.find(b"\r\n\r\n")
                    cut = len(data) if end < 0 else end + 4
                    sink.sendall(data[:cut])
                    data = data[cut:]
                if not pause:
                    sink.sendall(data)
                    continue
                for byte in data:
                    if server.stopped.wait(pause):
                        return
                    sink.sendall(bytes([byte]))
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def serve(server: _Server, conn: socket.socket) -> None:
        upstream_conn = socket.create_connection((target.hostname, target.port))
        server.connections.append(upstream_conn)
        asked: collections.deque = collections.deque()
        threading.Thread(target=pump, args=(server, conn, upstream_conn, delay if requests else 0, asked, False),
                         daemon=True).start()
        pump(server, upstream_conn, conn, delay, asked, True)

    return _Server(serve)


@pytest.fixture
def silent_endpoint():
    server = _Server(_silent)
    yield server.url
    server.close()


def _config_of(client):
    assert isinstance(client, aws_clients.BoundedClient), type(client)
    config = client.meta.config
    return config.connect_timeout, config.read_timeout, config.retries


def test_every_client_trainpipe_makes_has_bounded_timeouts_and_retries(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    clients = Clients(REGION)
    made = [clients.sagemaker, clients.s3, clients.cloudformation, clients.pricing, clients.client("logs"),
            Boto3Storage(region=REGION).client, endpoint_client("http://127.0.0.1:9", REGION, say=lambda _: None),
            pricing_client(boto3.Session(region_name=REGION))]
    expected = (aws_clients.CONNECT_TIMEOUT_S, aws_clients.READ_TIMEOUT_S,
                {"total_max_attempts": aws_clients.MAX_ATTEMPTS, "mode": "standard"})
    for client in made:
        assert _config_of(client) == expected, client.meta.service_model.service_name


def test_every_sdk_session_trainpipe_makes_hands_out_factory_clients(tmp_path, monkeypatch):
    """sagemaker.Session makes its clients from its boto_session, at once (SageMaker, runtime,
    metrics, feature store, S3) and later on demand (``boto_session.client("logs")``, IAM, STS):
    each session trainpipe makes has a BoundedSession, so every one of them is the factory's."""
    from pipeline.cli.local.sagemaker_local import sagemaker_local_session
    from pipeline.definition.session import OfflinePipelineSession
    from pipeline.local.store.session import LocalStoreSession

    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    clients = Clients(REGION)
    assert isinstance(clients.session, aws_clients.BoundedSession)
    made = [clients.session.client("sts"), clients.session.resource("iam").meta.client]
    for session in (OfflinePipelineSession(REGION, "bucket"), LocalStoreSession(workdir=tmp_path, bucket="bucket"),
                    sagemaker_local_session()):
        assert isinstance(session.boto_session, aws_clients.BoundedSession), type(session).__name__
        made += [session.s3_client, session.boto_session.client("logs"), session.boto_session.resource("iam").meta.client]
        if not session.local_mode:  # local mode's SageMaker and runtime clients are the SDK's in-process ones
            made += [session.sagemaker_client, session.sagemaker_runtime_client, session.sagemaker_metrics_client,
                     session.sagemaker_featurestore_runtime_client]
    for client in made:
        connect, read, retries = _config_of(client)
        assert (connect, retries) == (aws_clients.CONNECT_TIMEOUT_S,
                                      {"total_max_attempts": aws_clients.MAX_ATTEMPTS, "mode": "standard"})
        # The SDK's runtime client asks for 80 s reads (an endpoint may take 60 s to answer).
        assert read == (80 if client.meta.service_model.service_name == "sagemaker-runtime"
                        else aws_clients.READ_TIMEOUT_S)
    # A session handed in keeps its credentials and region.
    given = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="eu-west-1")
    wrapped = aws_clients.session(given)
    assert (wrapped.region_name, wrapped.get_credentials().access_key) == ("eu-west-1", "AKIDEXAMPLE")
    assert isinstance(wrapped.client("s3").upload_file.__self__, aws_clients.BoundedClient)


_SDK_SESSION = re.compile(r"(?:\bsagemaker\.(?:session\.)?|(?<![\w.]))(?:Local|Pipeline|LocalPipeline)?Session\(")


def test_no_module_makes_a_sagemaker_session_but_with_the_factorys_boto_session():
    """An SDK session made without one would make its own clients, with botocore's defaults."""
    offenders = []
    for path in sorted((REPO_ROOT / "pipeline").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if _SDK_SESSION.search(code) and "aws_clients.session(" not in code:
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_no_module_makes_a_boto3_client_but_the_factory():
    """A client made elsewhere would have botocore's defaults (60 s reads, legacy retries) and no
    deadline: every one goes through pipeline/aws_clients.py."""
    made_here = re.compile(r"(?<!`)(\bboto3|[sS]ession(\(\))?)\.(client|resource)\(")
    offenders = []
    for path in sorted((REPO_ROOT / "pipeline").rglob("*.py")):
        if path.name == "aws_clients.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if made_here.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_a_trickling_endpoint_ends_the_command_by_its_deadline_in_one_line(stack, monkeypatch, capsys):
    boto3.client("sagemaker", region_name=REGION).create_pipeline(
        PipelineName="trainpipe", RoleArn=stack["ExecutionRoleArn"],
        PipelineDefinition=json.dumps({"Version": "2020-12-01", "Steps": []}))
    # Straight to moto, the command works through the bounded clients (a paginated call included).
    assert main(["executions"]) == 0
    assert "has no executions" in capsys.readouterr().out

    proxy = trickle_proxy(os.environ["AWS_ENDPOINT_URL"])  # moto, as the stack fixture set it
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv(aws_clients.DEADLINE_ENV, "1")
        started = time.monotonic()
        assert main(["executions"]) == 2
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    err = capsys.readouterr().err.strip()
    readme_record.record(err)
    assert err == (f"trainpipe executions: error: reading the outputs of stack 'trainpipe': DescribeStacks "
                   f"(cloudformation at {proxy.url}) got no complete answer within 1 s (TRAINPIPE_AWS_DEADLINE_S): "
                   "check the network and the endpoint (AWS_ENDPOINT_URL, --s3-endpoint), or raise "
                   "TRAINPIPE_AWS_DEADLINE_S")
    # Through the proxy the stack's answer alone takes minutes; only the deadline ends it sooner.
    assert elapsed < GENEROUS_S


def test_a_silent_s3_endpoint_fails_the_local_store_by_its_deadline(silent_endpoint, monkeypatch):
    monkeypatch.setenv(aws_clients.DEADLINE_ENV, "1")
    storage = Boto3Storage(endpoint_url=silent_endpoint,
                           client=endpoint_client(silent_endpoint, REGION, say=lambda _: None))
    with pytest.raises(StorageError) as raised:
        storage.list("s3://bucket/data/")
    assert str(raised.value) == (
        f"s3://bucket/data/: ListObjectsV2 (s3 at {silent_endpoint}) got no complete answer within 1 s "
        "(TRAINPIPE_AWS_DEADLINE_S): check the network and the endpoint (AWS_ENDPOINT_URL, --s3-endpoint), "
        "or raise TRAINPIPE_AWS_DEADLINE_S")
    assert raised.value.kind == "Step.SERVICE_FAULT"  # transient: a step's retry policy may try it again


def test_a_deadline_that_is_not_a_positive_number_is_refused_in_one_line(aws, monkeypatch, capsys):
    monkeypatch.setenv(aws_clients.DEADLINE_ENV, "soon")
    assert main(["executions"]) == 2
    err = capsys.readouterr().err.strip()
    readme_record.record(err)
    assert err == ("trainpipe executions: error: TRAINPIPE_AWS_DEADLINE_S='soon' is not a positive number of "
                   "seconds; set it to one (e.g. TRAINPIPE_AWS_DEADLINE_S=120) or unset it")


def test_an_answer_in_time_and_an_error_are_the_calls_own(aws):
    """The bounded call hands back the client's result, and its exceptions as they were."""
    sagemaker = Clients(REGION).sagemaker
    assert sagemaker.list_pipelines()["PipelineSummaries"] == []
    with pytest.raises(ClientError) as raised:
        sagemaker.describe_pipeline(PipelineName="nowhere")
    assert raised.value.operation_name == "DescribePipeline"
    assert "nowhere" in raised.value.response["Error"]["Message"]
