"""What every model server here shares, whatever runs the model: SageMaker's limits, the
one-line JSON error, the body read against the 6 MB limit, and uvicorn started with the model
loading beside it and a drain on SIGTERM.

``server.py`` (TensorFlow Serving models) and ``handler.py`` (framework models with an
inference script) both build on it. Nothing here imports TensorFlow: a scikit-learn model's
server starts without it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import ipaddress
import json
import logging
import os
import queue as _queue_module
import signal
import socket
import sys
import threading
import traceback
from urllib.parse import urlsplit

import uvicorn
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from serving import connections

# SageMaker: an endpoint's request payload limit and its model's time to answer.
MAX_BODY_BYTES = 6 * 1024 * 1024
REQUEST_TIMEOUT_SECONDS = 60.0
DEFAULT_PORT = 8080  # SageMaker: the port a serving container listens on
# What keeps slow or stalled clients from holding the server. A whole body must arrive within
# BODY_READ_SECONDS (6 MB at 0.4 MB/s), else 408: a stalled upload frees its memory, and
# SIGTERM's drain waits for it no longer than this. Past MAX_CONNECTIONS connections and
# requests at once, uvicorn itself answers 503 (its limit_concurrency). A request waits at
# most QUEUE_SECONDS for a free model worker, else 503 (busy: retry).
BODY_READ_SECONDS = 15.0
MAX_CONNECTIONS = 64
QUEUE_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5  # uvicorn's default, stated: an idle keep-alive connection is closed

class RequestError(ValueError):
    """A bad request: the client's to fix. ``status`` is the HTTP code it answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> Response:
    """TF Serving's and SageMaker TFS's error body: ``{"error": "..."}``, one line."""
    return Response(json.dumps({"error": " ".join(message.split())}), status,
                    media_type="application/json")


async def read_body(request: Request, limit: int = MAX_BODY_BYTES,
                    seconds: float = BODY_READ_SECONDS) -> bytes | Response:
    """The body, or the 413 answer once it is over ``limit``, or the 408 answer when it has
    not all arrived within ``seconds``."""
    too_big = error(413, f"the request body is over {limit // 2**20} MB (SageMaker's limit); "
                         "send fewer instances per request")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_big
    chunks, size = [], 0

    async def read() -> Response | None:
        nonlocal size
        async for chunk in request.stream():  # counted as it arrives: no 1 GB body in memory
            size += len(chunk)
            if size > limit:
                return too_big
            chunks.append(chunk)
        return None

    try:
        refused = await asyncio.wait_for(read(), seconds)
    except ClientDisconnect:  # the client went away mid-body: no server error, no traceback in the log
        chunks.clear()
        return error(400, f"the client closed the connection before its body arrived ({size} bytes came)")
    except asyncio.TimeoutError:
        chunks.clear()
        return error(408, f"the request body did not arrive within {seconds:g} s ({size} bytes came); "
                          "send it whole and at once")
    return refused or b"".join(chunks)


class Busy(Exception):
    """Every model worker is taken and none came free in time: 503, retry later."""


class Workers:
    """At most ``count`` model calls at once, on threads of their own. A call past its time is
    answered 504 at once, but its thread cannot be stopped from Python (a TensorFlow op or a
    script runs on): it keeps its worker until it returns, and the others keep serving.
    Requests past ``count`` wait for a worker (first come, first served) up to ``queue``
    seconds, then get 503: never an unbounded pile of threads. The threads are daemons (not a
    ThreadPoolExecutor's, which the interpreter joins at exit): a call stuck past its time
    does not hold the process after SIGTERM's drain."""

    def __init__(self, count: int, queue: float = QUEUE_SECONDS):
        self.count, self.queue = count, queue
        self.calls: _queue_module.SimpleQueue = _queue_module.SimpleQueue()
        for index in range(count):
            threading.Thread(target=self._work, name=f"model-{index}", daemon=True).start()
        self.lock = threading.Lock()
        self.busy = 0  # workers taken
        self.overdue = 0  # of them, calls already answered 504
        self.waited = 0  # requests that found every worker taken (the load benchmark reads it)
        self.waiters: collections.deque = collections.deque()  # (loop, future), first first

    async def call(self, fn, *args, timeout: float):
        queue = self.queue
        if not await self._acquire(queue):
            with self.lock:
                overdue = self.overdue
            late = f", {overdue} of them past the {timeout:g} s limit" if overdue else ""
            raise Busy(f"the model is busy: all {self.count} workers are answering requests{late}, and "
                       f"none came free within {queue:g} s; retry later")
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.add_done_callback(lambda _: self._release())
        self.calls.put((future, fn, args))
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
        except asyncio.TimeoutError:
            with self.lock:
                self.overdue += 1
            future.add_done_callback(lambda _: self._not_overdue())
            raise

    async def _acquire(self, wait: float) -> bool:
        loop = asyncio.get_running_loop()
        with self.lock:
            if self.busy < self.count:
                self.busy += 1
                return True
            self.waited += 1
            entry = (loop, loop.create_future())
            self.waiters.append(entry)
        try:
            await asyncio.wait_for(entry[1], wait)
            return True
        except (asyncio.TimeoutError, asyncio.CancelledError) as stop:
            with self.lock:
                if entry in self.waiters:  # never handed a worker
                    self.waiters.remove(entry)
                    if isinstance(stop, asyncio.CancelledError):
                        raise
                    return False
            # _release handed this request a worker as it gave up: keep it, or give it back.
            if isinstance(stop, asyncio.CancelledError):
                self._release()
                raise
            return True

    def _release(self) -> None:
        """A worker came free (on its thread): handed to the first waiter, else freed."""
        with self.lock:
            while self.waiters:
                loop, waiter = self.waiters.popleft()
                try:
                    loop.call_soon_threadsafe(_grant, waiter)
                    return
                except RuntimeError:  # its event loop is closed: nobody waits there
                    continue
            self.busy -= 1

    def _work(self) -> None:
        while True:
            future, fn, args = self.calls.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as error:  # the request's to answer (RequestError, a bug: 500)
                future.set_exception(error)

    def _not_overdue(self) -> None:
        with self.lock:
            self.overdue -= 1


def _grant(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(True)


# --- Who may call: the bound address's names, and no web page --------------------------------
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_names(bound: str) -> frozenset[str]:
    """The names a request's Host may carry for a server bound to ``bound``: the address
    itself, the loopback names for a loopback or wildcard address, and this machine's names
    for a wildcard one (where any IP address is taken too: no DNS name rebinds to one)."""
    names = {bound.lower()}
    if is_loopback(bound) or bound in WILDCARD_ADDRESSES:
        names |= LOOPBACK_NAMES
    if bound in WILDCARD_ADDRESSES:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def _host_of(value: str) -> str:
    """``name:port``, ``[::1]:port`` or a bare name -> the name, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    name, sep, port = value.rpartition(":")
    return name if sep and port.isdigit() and ":" not in name else value


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class CallerCheck:
    """ASGI middleware in front of the app. A request whose Host is not a name of the bound
    address is refused (400): DNS rebinding points a web page's own name at this address. A
    request with an ``Origin`` of another name is refused (403): a browser sends it with a
    cross-origin POST, which needs no preflight for a text/plain or untyped body. boto3, the
    SDK, curl and requests send no Origin."""

    def __init__(self, app, bound: str):
        self.app, self.bound = app, bound
        self.names = host_names(bound)
        self.any_ip = bound in WILDCARD_ADDRESSES

    def allowed(self, name: str) -> bool:
        return name in self.names or (self.any_ip and _is_ip(name))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self.allowed(_host_of(headers.get("host", ""))):
            answer = error(400, f"Host {headers.get('host', '(none)')!r} is not a name of this server "
                                f"(bound to {self.bound}: {', '.join(sorted(self.names))}); call it by one "
                                "of those")
            return await answer(scope, receive, send)
        origin = headers.get("origin")
        if origin is not None and not self.allowed(_host_of(urlsplit(origin).netloc or origin)):
            answer = error(403, f"a request from the web page {origin} is refused: this server answers "
                                "clients (boto3, the SageMaker SDK, curl), never a browser's cross-origin "
                                "request")
            return await answer(scope, receive, send)
        return await self.app(scope, receive, send)

async def _http_error(request: Request, exc: HTTPException) -> Response:
    return error(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}")


async def _server_error(request: Request, exc: Exception) -> Response:
    traceback.print_exception(exc, file=sys.stderr)
    return error(500, f"internal error ({type(exc).__name__}); the server keeps serving")


# Starlette's exception_handlers: a wrong route or method, and a bug, are one JSON line too.
EXCEPTION_HANDLERS = {HTTPException: _http_error, Exception: _server_error}


def run(app, host: str, port: int, load, access_log: bool = False,
        header_seconds: float = connections.HEADER_SECONDS) -> uvicorn.Server:
    """Serve ``app`` until SIGTERM or Ctrl-C, which drain the requests in flight.

    ``load(server)`` runs on a thread beside it, so that /ping can answer 503 while the model
    loads; it sets ``server.should_exit`` when the model cannot be served. Returns the stopped
    server (``server.started`` is false when the port was taken: uvicorn said so)."""
    # uvicorn's own bounds: limit_concurrency answers 503 past MAX_CONNECTIONS connections and
    # requests at once, counting only connections whose request headers have arrived, which
    # must arrive within header_seconds (connections.py); timeout_keep_alive closes idle ones. A request in flight is
    # bounded by BODY_READ_SECONDS to arrive and the model's timeout to answer, so the drain
    # on SIGTERM ends by itself; the graceful limit is the backstop.
    config = uvicorn.Config(CallerCheck(app, host), host=host, port=port, log_level="warning",
                            access_log=access_log, limit_concurrency=MAX_CONNECTIONS,
                            http=connections.protocol(header_seconds),
                            timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            timeout_graceful_shutdown=int(REQUEST_TIMEOUT_SECONDS + BODY_READ_SECONDS) + 5)
    if access_log:  # uvicorn writes its access lines at INFO, under the "warning" set above
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    server = uvicorn.Server(config)
    if not is_loopback(host):
        print(f"serve: warning: listening on {host}: every machine that can reach this one can call the "
              "model, with no authentication; use --host 127.0.0.1 unless that is what you want",
              file=sys.stderr, flush=True)
    threading.Thread(target=load, args=(server,), name="load-model", daemon=True).start()
    # Uvicorn re-raises the signal that stopped it once it has drained: with these handlers
    # that re-raise is a no-op, and a drained server exits 0, not killed by its own signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    return server


def say_stopped() -> None:
    """The last line, written straight to the file descriptor: it reaches a redirected log
    even where the interpreter's exit is then cut short (TensorFlow's threads, a kill)."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), b"serve: stopped (requests in flight answered)\n")


def process_seconds() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere): startup includes
    importing the framework (TensorFlow), which is most of it."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def resident_mib() -> float:
    """This process's resident memory (Linux /proc; the peak elsewhere)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
