"""A deadline for the whole of a call to a tracking server, not only for each read.

MLflow's client (requests, urllib3) bounds each socket read (``MLFLOW_HTTP_REQUEST_TIMEOUT``),
never a request as a whole: a server that sends one byte every few seconds keeps every read
inside its timeout and the call going for ever. Python cannot interrupt a thread blocked in a
read, so the call runs on a daemon thread and the caller stops waiting for it at the
deadline; the thread is left to the process's exit, which does not wait for daemon threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TypeVar

from pipeline.aws_deadlines import call_by

ENV_VAR = "TRAINPIPE_TRACKING_DEADLINE_S"
DEFAULT_S = 30.0  # three of MLflow's per-read timeouts here (10 s): an answering server is far quicker

T = TypeVar("T")


class DeadlineExceeded(Exception):
    pass


def seconds(environ: Mapping[str, str] = os.environ) -> float:
    """The deadline: ``TRAINPIPE_TRACKING_DEADLINE_S`` (a positive number of seconds), else 30 s."""
    raw = environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:  # also NaN
        from pipeline.errors import UserError

        raise UserError(f"{ENV_VAR}={raw!r} is not a positive number of seconds; set it to one "
                        f"(e.g. {ENV_VAR}={DEFAULT_S:g}) or unset it")
    return value


def missed(limit: float) -> str:
    """The reason a call that missed its deadline gives, in words."""
    return f"no complete answer within {limit:g} s ({ENV_VAR})"


def call(action: Callable[[], T], limit: float, name: str = "trainpipe-mlflow-call") -> T:
    """``action()``'s result or exception, or ``DeadlineExceeded`` once ``limit`` seconds pass
    (on a daemon thread, as every AWS call is bounded: ``pipeline/aws_deadlines.py``)."""
    return call_by(action, limit, lambda: DeadlineExceeded(missed(limit)), name=name)
