"""pipeline/local/jobs/model_client.py: a request to a model server ends by its deadline as a
whole, against real servers on 127.0.0.1: one that trickles its answer (each read within any
socket timeout), one that sends its headers and stalls, one that answers at once."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from pipeline.local.jobs import model_client


def serve_once(answer_slowly) -> tuple[str, threading.Event]:
    """A server on 127.0.0.1 whose one connection gets ``answer_slowly(conn, stop)``."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def run() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            conn.recv(65536)  # the request (small: it fits one read)
            with contextlib.suppress(OSError):  # the client shut the connection at its deadline
                answer_slowly(conn, stop)

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/invocations", stop


def trickle(conn: socket.socket, stop: threading.Event, length: bool = True) -> None:
    head = b"HTTP/1.1 200 OK\r\n" + (b"Content-Length: 1000\r\n" if length else b"Connection: close\r\n") + b"\r\n"
    conn.sendall(head)
    while not stop.wait(0.1):  # a byte every 0.1 s: 100 s for the whole body
        conn.sendall(b"x")


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "until-close"])
def test_a_trickled_answer_misses_the_deadline_though_every_read_is_quick(length):
    url, stop = serve_once(lambda conn, stop: trickle(conn, stop, length))
    try:
        with pytest.raises(model_client.DeadlineMissed) as raised:
            model_client.request("POST", url, 1, b"1,2", {"Content-Type": "text/csv"})
    finally:
        stop.set()
    assert str(raised.value) == "no complete answer within 1 s"


def test_headers_then_silence_miss_the_deadline():
    def stall(conn, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab")
        stop.wait(30)

    url, stop = serve_once(stall)
    try:
        with pytest.raises(model_client.DeadlineMissed):
            model_client.request("POST", url, 1, b"{}")
    finally:
        stop.set()


def test_an_answer_in_time_is_returned_whole_with_its_status():
    url, _ = serve_once(lambda conn, stop: conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\n\r\nnope"))
    # An answer sent at once is in time by far: 60 s, as a loaded 2-core machine may stall a thread for seconds.
    assert model_client.request("POST", url, 60, b"{}") == (400, b"nope")


def test_nothing_listening_is_no_answer_not_a_missed_deadline():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(model_client.NoAnswer) as raised:
        model_client.request("GET", f"http://127.0.0.1:{port}/ping", 5)
    assert not isinstance(raised.value, model_client.DeadlineMissed)
    assert "ConnectionRefusedError" in str(raised.value)
