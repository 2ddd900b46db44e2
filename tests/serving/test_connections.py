"""Slow headers (serving/connections.py) against a real server on 127.0.0.1 (``web.run`` as
both model servers start it, a trivial app: no TensorFlow): 70 connections that never finish
their headers (uvicorn's 503 limit is 64) leave ``/ping`` and requests answering 200; each gets
a 408 at the header deadline; past the cap on waiting connections the oldest goes first."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from serving import web
from tests import readme_record
from tests.serving.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
HEADER_SECONDS = 2  # what the stalled connections are meant to miss
# For what must happen in time (the server's start, its 408s once HEADER_SECONDS pass): a loaded
# 2-core CI machine may stall a process for seconds; a deadline that never fired ends in a socket timeout.
SLACK_S = 30
SERVER = """
import sys
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from serving import connections, web

connections.MAX_PENDING = int(sys.argv[3])

async def ping(request):
    return Response("", 200)

app = Starlette(routes=[Route("/ping", ping), Route("/invocations", ping, methods=["POST"])])
web.run(app, "127.0.0.1", int(sys.argv[1]), lambda server: None, header_seconds=float(sys.argv[2]))
"""


def start(header_seconds: float, max_pending: int):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(header_seconds), str(max_pending)],
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SLACK_S
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):  # not up yet, or slow: ask again
            if requests.get(url + "/ping", timeout=5).status_code == 200:
                break
        time.sleep(0.05)
    return process, url, port


@pytest.fixture
def server():
    process, url, port = start(HEADER_SECONDS, 256)
    yield url, port
    process.terminate()
    process.communicate(timeout=30)


def stalled(port: int, count: int) -> list[socket.socket]:
    """Connections that send the start of a request and stop before the headers end."""
    out = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HEADER_SECONDS + SLACK_S)
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
        out.append(sock)
    return out


def test_stalled_headers_never_turn_requests_away_and_get_a_408_at_their_deadline(server):
    url, port = server
    socks = stalled(port, web.MAX_CONNECTIONS + 6)
    try:
        time.sleep(0.2)  # all accepted and waiting
        with requests.Session() as session:
            answers = [session.get(url + "/ping", timeout=5).status_code for _ in range(20)]
            answers += [requests.post(url + "/invocations", data=b"{}", timeout=5).status_code for _ in range(5)]
        assert answers == [200] * 25
        started = time.monotonic()
        replies = [sock.recv(4096) for sock in socks]  # each answered at its deadline, then closed
        assert time.monotonic() - started < HEADER_SECONDS + SLACK_S
    finally:
        for sock in socks:
            sock.close()
    assert all(r.startswith(b"HTTP/1.1 408 ") for r in replies), replies[:2]
    message = json.loads(replies[0].split(b"\r\n\r\n", 1)[1])["error"]
    readme_record.record(message)
    assert message == f"the request's headers did not arrive within {HEADER_SECONDS} s; send them whole and at once"


def test_past_the_cap_on_waiting_connections_the_oldest_is_closed_first():
    process, url, port = start(30, 4)
    try:
        socks = stalled(port, 6)
        try:
            for sock in socks[:2]:  # the two that waited longest, closed as the 5th and 6th came
                sock.settimeout(5)
                assert sock.recv(4096).startswith(b"HTTP/1.1 408 ")
            for sock in socks[2:]:  # the rest wait on (30 s)
                sock.settimeout(0.3)
                with pytest.raises(TimeoutError):
                    sock.recv(4096)
            assert requests.get(url + "/ping", timeout=5).status_code == 200
        finally:
            for sock in socks:
                sock.close()
    finally:
        process.terminate()
        process.communicate(timeout=30)
