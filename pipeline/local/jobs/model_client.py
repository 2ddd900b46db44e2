"""HTTP to a model server on 127.0.0.1 with a deadline for the whole request, not each read.

A socket timeout (urllib's ``timeout=``) bounds each read and restarts with every byte: a server
that trickles its answer, or sends its headers and then stalls mid-body, keeps a request going
for as long as it likes. Here a timer shuts the connection's socket down at the deadline, which
wakes the read blocked on it; the request then fails with ``DeadlineMissed``. The caller's own
thread does the request, so nothing is left running after it returns.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.parse


class NoAnswer(Exception):
    """The server could not be reached, or broke the connection before a whole answer."""


class DeadlineMissed(NoAnswer):
    """No complete answer (status, headers and body) within the deadline."""

    def __init__(self, limit: float):
        super().__init__(f"no complete answer within {limit:g} s")
        self.limit = limit


def request(method: str, url: str, limit: float, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """(status, body) of ``method url``, whole within ``limit`` seconds, or NoAnswer/DeadlineMissed."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=limit)
    lock = threading.Lock()
    state: dict = {"done": False, "fired": False, "sock": None}

    def expire() -> None:
        with lock:
            if state["done"]:
                return
            state["fired"] = True
            sock = state["sock"]
        if sock is not None:  # None: still connecting, which the socket timeout bounds
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)  # wakes a recv or send blocked on it

    timer = threading.Timer(limit, expire)
    timer.daemon = True
    timer.start()
    try:
        connection.connect()
        with lock:
            # Kept here, not read from the connection at the deadline: for an answer that ends
            # when the server closes, http.client hands the socket to the response and forgets it.
            state["sock"] = connection.sock
            if state["fired"]:  # the connect itself took the whole deadline
                raise DeadlineMissed(limit)
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        with lock:
            # A server that ends its answer by closing the connection (no Content-Length) reads
            # as a short, complete answer once the socket is shut down: it is still late.
            if state["fired"]:
                raise DeadlineMissed(limit)
            state["done"] = True
        return response.status, data
    except DeadlineMissed:
        raise
    except (OSError, http.client.HTTPException) as error:
        # A socket timeout is a whole ``limit`` spent on one operation: the deadline has passed
        # even where the timer's thread has not run yet (a loaded machine: the two race).
        if state["fired"] or isinstance(error, TimeoutError):
            raise DeadlineMissed(limit) from None
        raise NoAnswer(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__) from None
    finally:
        timer.cancel()
        connection.close()
