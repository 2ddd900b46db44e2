"""Every boto3 client trainpipe makes, made here: bounded connects, reads and retries, and a
deadline for each API call as a whole.

botocore's own bounds are per attempt and per socket read: ``read_timeout`` restarts with every
byte, so an endpoint (a proxy, a half-broken emulator, a captive portal) that trickles its
answer keeps a call going for ever, and one that never answers costs every attempt's read
timeout plus the back-off between them. So each client is made with one ``Config`` (explicit
connect and read timeouts, standard retries with a bounded number of attempts), and is handed
out wrapped so that each API call, retries included, ends by ``TRAINPIPE_AWS_DEADLINE_S``
(120 s unless set), with ``AwsDeadlineExceeded`` naming the operation, the endpoint and the fix.

Python cannot interrupt a thread blocked in a read, so a bounded call runs on a daemon thread
and the caller stops waiting for it at the deadline; the thread is left to the process's exit,
which does not wait for daemon threads (as pipeline/tracking/deadline.py does for MLflow).

Object transfers (``put_object``, ``upload_part``, ``copy_object``, and the transfer manager's
``upload_file``/``download_file``) have no whole-call deadline: how long one may take depends
on its size and the network. They keep the per-read timeout and the bounded retries, so a dead
connection still ends them. ``get_object`` is bounded up to its answer's headers; its body is
read by the caller.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from botocore.config import Config
from botocore.exceptions import BotoCoreError

from pipeline.errors import UserError

CONNECT_TIMEOUT_S = 10  # a TCP/TLS connect to an AWS endpoint takes well under a second
READ_TIMEOUT_S = 60  # per socket read: a silent connection is dead after this long
MAX_ATTEMPTS = 5  # in all, the first try included; standard mode backs off between them
DEADLINE_ENV = "TRAINPIPE_AWS_DEADLINE_S"
DEFAULT_DEADLINE_S = 120.0  # a control-plane call answers in seconds; this allows retries and back-off

CONFIG = Config(
    connect_timeout=CONNECT_TIMEOUT_S,
    read_timeout=READ_TIMEOUT_S,
    # total_max_attempts counts the first try; botocore's max_attempts counts only the retries.
    retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    user_agent_extra="trainpipe",
)

# Calls whose duration grows with the bytes they move: see the module's docstring.
TRANSFERS = frozenset({"put_object", "upload_part", "upload_part_copy", "copy_object"})

T = TypeVar("T")


class AwsDeadlineExceeded(BotoCoreError):
    """An API call (retries included) got no complete answer by its deadline.

    A BotoCoreError, so every place that already turns botocore's failures into one line (the
    cloud commands' ``aws_errors``, the local store's ``StorageError``) says this one too."""

    fmt = ("{operation} ({service} at {endpoint}) got no complete answer within {limit:g} s "
           "(" + DEADLINE_ENV + "): check the network and the endpoint (AWS_ENDPOINT_URL, "
           "--s3-endpoint), or raise " + DEADLINE_ENV)


def deadline_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``TRAINPIPE_AWS_DEADLINE_S`` (a positive number of seconds), else 120 s."""
    raw = environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:  # also NaN
        raise UserError(f"{DEADLINE_ENV}={raw!r} is not a positive number of seconds; set it to one "
                        f"(e.g. {DEADLINE_ENV}={DEFAULT_DEADLINE_S:g}) or unset it")
    return value


def client(session, service: str, *, region: str | None = None, endpoint_url: str | None = None,
           limit: float | None = None):
    """A ``service`` client of ``session`` (a boto3.Session) with trainpipe's Config, each API
    call bounded by ``limit`` seconds (``TRAINPIPE_AWS_DEADLINE_S`` when None)."""
    made = session.client(service, region_name=region, endpoint_url=endpoint_url, config=CONFIG)
    return bounded(made, limit)


def bounded(made, limit: float | None = None):
    """``made`` (a botocore client: one of ``client()``'s, or a test's with a Stubber) with each
    API call bounded by ``limit`` seconds; an already bounded client is returned as it is."""
    if isinstance(made, BoundedClient):
        return made
    return BoundedClient(made, deadline_seconds() if limit is None else limit)


def call_by(fn: Callable[[], T], limit: float, on_miss: Callable[[], BaseException],
            name: str = "trainpipe-aws-call") -> T:
    """``fn()``'s result or exception, or ``on_miss()`` raised once ``limit`` seconds pass."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as error:  # noqa: BLE001 (handed to the caller as it was)
            outcome["error"] = error

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise on_miss()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class BoundedClient:
    """A botocore client whose API calls, and each page a paginator fetches, end by a deadline.

    Everything else (``meta``, ``exceptions``, the transfer manager's methods) is the client's
    own, so code written for a plain client works unchanged."""

    def __init__(self, made, limit: float):
        self._client, self.limit = made, limit

    @property
    def unbounded(self):
        """The client itself (for botocore's Stubber, and for transfers)."""
        return self._client

    def __getattr__(self, name: str):
        attribute = getattr(self._client, name)
        if name == "get_paginator":
            return self._paginator
        if name in TRANSFERS or name not in self._client.meta.method_to_api_mapping:
            return attribute
        operation = self._client.meta.method_to_api_mapping[name]

        @functools.wraps(attribute)
        def call(*args, **kwargs):
            return call_by(lambda: attribute(*args, **kwargs), self.limit, lambda: self._missed(operation))

        return call

    def _missed(self, operation: str) -> AwsDeadlineExceeded:
        meta = self._client.meta
        return AwsDeadlineExceeded(operation=operation, service=meta.service_model.service_name,
                                   endpoint=meta.endpoint_url, limit=self.limit)

    def _paginator(self, operation_name: str):
        return _BoundedPaginator(self, self._client.get_paginator(operation_name),
                                 self._client.meta.method_to_api_mapping.get(operation_name, operation_name))


class _BoundedPaginator:
    """A paginator whose every page (one API call, retries included) ends by the deadline."""

    def __init__(self, owner: BoundedClient, paginator, operation: str):
        self._owner, self._paginator, self._operation = owner, paginator, operation

    def __getattr__(self, name: str):
        return getattr(self._paginator, name)

    def paginate(self, **kwargs):
        pages = iter(self._paginator.paginate(**kwargs))
        done = object()
        while True:
            page = call_by(lambda: next(pages, done), self._owner.limit,
                           lambda: self._owner._missed(self._operation))
            if page is done:
                return
            yield page
