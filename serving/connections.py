"""Connections whose request headers have not all arrived: bounded in time and number, and
never counted against the requests the server answers at once.

uvicorn (its h11 protocol) bounds nothing before a request's headers are complete: a client
that opens a connection and sends its headers a byte at a time, or never finishes them, holds
it for ever, and every open connection counts towards ``limit_concurrency``: 70 such
connections made every ``/ping`` a 503. Here a connection waiting for a request's headers
(a new one, or a kept-alive one between requests):

- is not in uvicorn's connection count until its headers are complete, so that stalled
  clients never turn well-formed requests away (the 503 limit counts requests being answered);
- gets ``HEADER_SECONDS`` for the request line and headers, from its opening or from the end of
  its previous response, then a 408 and the connection closed;
- past ``MAX_PENDING`` such connections, the one that has waited longest is closed (408) as
  a new one comes: a well-formed client sends its headers in milliseconds, a stalled one never.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 10.0
MAX_PENDING = 256


def _timeout_answer(seconds: float) -> bytes:
    body = json.dumps({"error": f"the request's headers did not arrive within {seconds:g} s; "
                                "send them whole and at once"}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def protocol(header_seconds: float = HEADER_SECONDS, max_pending: int | None = None) -> type[asyncio.Protocol]:
    """The protocol class for ``uvicorn.Config(http=...)``."""
    max_pending = max_pending or MAX_PENDING

    class HeaderDeadline(H11Protocol):
        _timer: asyncio.TimerHandle | None = None

        def _pending(self) -> dict:
            # Per server (its shared state), in the order they began waiting.
            if not hasattr(self.server_state, "trainpipe_pending"):
                self.server_state.trainpipe_pending = {}
            return self.server_state.trainpipe_pending

        def _wait_for_headers(self) -> None:
            self.connections.discard(self)
            pending = self._pending()
            pending.pop(self, None)
            pending[self] = None
            while len(pending) > max_pending:
                next(iter(pending))._give_up()
            self._cancel()
            self._timer = self.loop.call_later(header_seconds, self._give_up)

        def _headers_arrived(self) -> None:
            self._cancel()
            self._pending().pop(self, None)
            if not self.transport.is_closing():  # counted from here on, as uvicorn counts it
                self.connections.add(self)

        def _cancel(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _give_up(self) -> None:
            self._cancel()
            self._pending().pop(self, None)
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self.transport.write(_timeout_answer(header_seconds))
                self.transport.close()

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._wait_for_headers()

        def connection_lost(self, exc) -> None:
            self._cancel()
            self._pending().pop(self, None)
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE and self in self._pending():
                self._headers_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # may start a pipelined request (handle_events)
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._wait_for_headers()

    return HeaderDeadline
