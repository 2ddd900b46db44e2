"""What every model server here shares, whatever runs the model: SageMaker's limits, the
one-line JSON error, the body read against the 6 MB limit, and uvicorn started with the model
loading beside it and a drain on SIGTERM.

``server.py`` (TensorFlow Serving models) and ``handler.py`` (framework models with an
inference script) both build on it. Nothing here imports TensorFlow: a scikit-learn model's
server starts without it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import traceback

import uvicorn
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

# SageMaker: an endpoint's request payload limit and its model's time to answer.
MAX_BODY_BYTES = 6 * 1024 * 1024
REQUEST_TIMEOUT_SECONDS = 60.0
DEFAULT_PORT = 8080  # SageMaker: the port a serving container listens on


class RequestError(ValueError):
    """A bad request: the client's to fix. ``status`` is the HTTP code it answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> Response:
    """TF Serving's and SageMaker TFS's error body: ``{"error": "..."}``, one line."""
    return Response(json.dumps({"error": " ".join(message.split())}), status,
                    media_type="application/json")


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes | Response:
    """The body, or the 413 answer once it is over ``limit``."""
    too_big = error(413, f"the request body is over {limit // 2**20} MB (SageMaker's limit); "
                         "send fewer instances per request")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_big
    chunks, size = [], 0
    async for chunk in request.stream():  # counted as it arrives: no 1 GB body in memory
        size += len(chunk)
        if size > limit:
            return too_big
        chunks.append(chunk)
    return b"".join(chunks)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return error(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}")


async def _server_error(request: Request, exc: Exception) -> Response:
    traceback.print_exception(exc, file=sys.stderr)
    return error(500, f"internal error ({type(exc).__name__}); the server keeps serving")


# Starlette's exception_handlers: a wrong route or method, and a bug, are one JSON line too.
EXCEPTION_HANDLERS = {HTTPException: _http_error, Exception: _server_error}


def run(app, host: str, port: int, load, access_log: bool = False) -> uvicorn.Server:
    """Serve ``app`` until SIGTERM or Ctrl-C, which drain the requests in flight.

    ``load(server)`` runs on a thread beside it, so that /ping can answer 503 while the model
    loads; it sets ``server.should_exit`` when the model cannot be served. Returns the stopped
    server (``server.started`` is false when the port was taken: uvicorn said so)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=access_log,
                            timeout_graceful_shutdown=int(REQUEST_TIMEOUT_SECONDS) + 5)
    if access_log:  # uvicorn writes its access lines at INFO, under the "warning" set above
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    server = uvicorn.Server(config)
    threading.Thread(target=load, args=(server,), name="load-model", daemon=True).start()
    # Uvicorn re-raises the signal that stopped it once it has drained: with these handlers
    # that re-raise is a no-op, and a drained server exits 0, not killed by its own signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    return server


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
