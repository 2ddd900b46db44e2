"""The deadlines' primitives every bounded AWS call shares: the bounds (connect and read
timeouts, attempts in all), the deadlines read from the environment, the exceptions that say a
deadline was missed, and ``call_by``, which stops waiting for a call at its deadline.

botocore's own bounds are per attempt and per socket read, so pipeline/aws_clients.py's
clients (and pipeline/aws_transfers.py's object transfers) each end, as a whole, by a deadline:
``TRAINPIPE_AWS_DEADLINE_S`` (120 s unless set) for an API call, retries included.

Python cannot interrupt a thread blocked in a read, so a bounded call runs on a daemon thread
and the caller stops waiting for it at the deadline; the thread is left to the process's exit,
which does not wait for daemon threads (as pipeline/tracking/deadline.py does for MLflow).

Object transfers take a time that grows with their size, so theirs is a deadline that grows
too: ``TRAINPIPE_AWS_DEADLINE_S`` (the floor: connect, retries, back-off, the answer) plus the
object's bytes at ``TRAINPIPE_AWS_MIN_RATE_KIB_S`` (128 KiB/s unless set; DEFAULT_MIN_RATE_KIB_S says why).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError

from pipeline.errors import UserError

CONNECT_TIMEOUT_S = 10  # a TCP/TLS connect to an AWS endpoint takes well under a second
READ_TIMEOUT_S = 60  # per socket read: a silent connection is dead after this long
MAX_ATTEMPTS = 5  # in all, the first try included; standard mode backs off between them
DEADLINE_ENV = "TRAINPIPE_AWS_DEADLINE_S"
DEFAULT_DEADLINE_S = 120.0  # a control-plane call answers in seconds; this allows retries and back-off
MIN_RATE_ENV = "TRAINPIPE_AWS_MIN_RATE_KIB_S"
# 128 KiB/s is 1 Mbit/s: below the slowest uplink still sold (ADSL's ~1 Mbit/s) and about a
# tenth of a typical home upload, so a working link never meets it, while a link that
# trickles (a stalled proxy, a dying connection that still answers each read) is ended in
# time that grows with the object: a 100 MiB code bundle or model gets 120 s + 800 s.
DEFAULT_MIN_RATE_KIB_S = 128.0

T = TypeVar("T")


class AwsDeadlineExceeded(BotoCoreError):
    """An API call (retries included) got no complete answer by its deadline.

    A BotoCoreError, so every place that already turns botocore's failures into one line (the
    cloud commands' ``aws_errors``, the local store's ``StorageError``) says this one too."""

    fmt = ("{operation} ({service} at {endpoint}) got no complete answer within {limit:g} s "
           "(" + DEADLINE_ENV + "): check the network and the endpoint (AWS_ENDPOINT_URL, "
           "--s3-endpoint), or raise " + DEADLINE_ENV)


class TransferDeadlineExceeded(BotoCoreError):
    """An object transfer (retries included) did not complete by its size's deadline."""

    fmt = ("{operation} of s3://{bucket}/{key} ({size}, s3 at {endpoint}) did not complete within "
           "{limit:.0f} s: " + DEADLINE_ENV + " ({floor:g} s) plus {size} at {rate:g} KiB/s "
           "(" + MIN_RATE_ENV + "): check the network and the endpoint (AWS_ENDPOINT_URL, "
           "--s3-endpoint), or lower " + MIN_RATE_ENV + " for a slower link")


class CopyDeadlineExceeded(TransferDeadlineExceeded):
    """A server-side copy (retries included) did not complete by its size's deadline."""

    fmt = ("{operation} of {source} to s3://{bucket}/{key} ({size}, s3 at {endpoint}) did not complete "
           "within {limit:.0f} s: " + DEADLINE_ENV + " ({floor:g} s) plus {size} at {rate:g} KiB/s "
           "(" + MIN_RATE_ENV + "): check the endpoint (AWS_ENDPOINT_URL, --s3-endpoint), or lower "
           + MIN_RATE_ENV + " for a slower S3")


def _positive(environ: Mapping[str, str], name: str, default: float, unit: str) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):  # also NaN
        raise UserError(f"{name}={raw!r} is not a positive number of {unit}; set it to one "
                        f"(e.g. {name}={default:g}) or unset it")
    return value


def deadline_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``TRAINPIPE_AWS_DEADLINE_S`` (a positive number of seconds), else 120 s."""
    return _positive(environ, DEADLINE_ENV, DEFAULT_DEADLINE_S, "seconds")


def min_rate_kib_s(environ: Mapping[str, str] = os.environ) -> float:
    """``TRAINPIPE_AWS_MIN_RATE_KIB_S`` (a positive number of KiB/s), else 128."""
    return _positive(environ, MIN_RATE_ENV, DEFAULT_MIN_RATE_KIB_S, "KiB/s")


def transfer_deadline(size: int, floor: float | None = None, environ: Mapping[str, str] = os.environ) -> float:
    """Seconds a transfer of ``size`` bytes may take: the floor (``TRAINPIPE_AWS_DEADLINE_S``
    when None) plus the bytes at the minimum rate."""
    floor = deadline_seconds(environ) if floor is None else floor
    return floor + size / (min_rate_kib_s(environ) * 1024)


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
