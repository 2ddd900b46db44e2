"""Every boto3 client trainpipe makes, made here: bounded connects, reads and retries, and a
deadline for each API call as a whole.

botocore's own bounds are per attempt and per socket read: ``read_timeout`` restarts with every
byte, so an endpoint (a proxy, a half-broken emulator, a captive portal) that trickles its
answer keeps a call going for ever, and one that never answers costs every attempt's read
timeout plus the back-off between them. So each client is made with one ``Config`` (explicit
connect and read timeouts, standard retries with a bounded number of attempts), and is handed
out wrapped so that each API call, retries included, ends by ``TRAINPIPE_AWS_DEADLINE_S``
(120 s unless set), with ``AwsDeadlineExceeded`` naming the operation, the endpoint and the fix.
The deadlines' primitives (the bounds, the deadlines, the exceptions, ``call_by``) are
pipeline/aws_deadlines.py's; S3 object transfers, whose deadlines grow with their size, are
pipeline/aws_transfers.py's ``S3Transfers``, which BoundedClient inherits.

Clients the SageMaker SDK makes itself (``sagemaker.Session`` builds its SageMaker, runtime,
metrics, feature-store and S3 clients, and more on demand, from its ``boto_session``) come from
``session()``: a boto3 Session whose every client (and every resource built on one) is this
module's, bounded the same way.
"""

from __future__ import annotations

import functools
import inspect

import boto3
from botocore.config import Config

from pipeline.aws_deadlines import (
    CONNECT_TIMEOUT_S,
    DEADLINE_ENV,
    MAX_ATTEMPTS,
    MIN_RATE_ENV,
    READ_TIMEOUT_S,
    AwsDeadlineExceeded,
    CopyDeadlineExceeded,
    TransferDeadlineExceeded,
    call_by,
    deadline_seconds,
    transfer_deadline,
)
from pipeline.aws_transfers import S3Transfers

# What callers and tests import from here, the factory, wherever it is defined.
__all__ = [
    "CONFIG", "CONNECT_TIMEOUT_S", "DEADLINE_ENV", "MAX_ATTEMPTS", "MIN_RATE_ENV", "READ_TIMEOUT_S",
    "AwsDeadlineExceeded", "BoundedClient", "BoundedSession", "CopyDeadlineExceeded",
    "TransferDeadlineExceeded", "bounded", "call_by", "client", "deadline_seconds", "session",
    "transfer_deadline",
]

CONFIG = Config(
    connect_timeout=CONNECT_TIMEOUT_S,
    read_timeout=READ_TIMEOUT_S,
    # total_max_attempts counts the first try; botocore's max_attempts counts only the retries.
    retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    user_agent_extra="trainpipe",
)


def client(session, service: str, *, region: str | None = None, endpoint_url: str | None = None,
           limit: float | None = None):
    """A ``service`` client of ``session`` (a boto3.Session) with trainpipe's Config, each API
    call bounded by ``limit`` seconds (``TRAINPIPE_AWS_DEADLINE_S`` when None)."""
    make = session.unbounded_client if isinstance(session, BoundedSession) else session.client
    made = make(service, region_name=region, endpoint_url=endpoint_url, config=CONFIG)
    return bounded(made, limit)


class BoundedSession(boto3.Session):
    """A boto3 Session whose clients are made with trainpipe's Config (a caller's own Config,
    such as the SDK's longer read timeout for its runtime client, merged over it) and bounded
    as ``client()``'s are; ``resource()`` builds on ``client()``, so resources are bounded too.
    Hand it to the SageMaker SDK as ``boto_session``: every client the SDK makes, then and later
    (``boto_session.client("logs")``, ``.resource("s3")``), is one of this module's."""

    def client(self, *args, **kwargs):
        return bounded(self.unbounded_client(*args, **kwargs))

    def _register_default_handlers(self):
        # boto3 registers its handlers (the S3 transfer methods among them) on the botocore
        # session; one it has already registered on refuses a second registration.
        if not getattr(self._session, "_trainpipe_boto3_handlers", False):
            super()._register_default_handlers()
            self._session._trainpipe_boto3_handlers = True

    def unbounded_client(self, *args, **kwargs):
        arguments = _SESSION_CLIENT.bind(self, *args, **kwargs).arguments
        arguments.pop("self")
        given = arguments.get("config")
        arguments["config"] = CONFIG.merge(given) if given is not None else CONFIG
        return super().client(**arguments)


_SESSION_CLIENT = inspect.signature(boto3.Session.client)


def session(base: boto3.Session | None = None, **kwargs) -> BoundedSession:
    """``base`` (its credentials, profile and region: the same botocore session) as a
    BoundedSession; without ``base``, a new one made with ``kwargs`` as boto3.Session takes them."""
    if isinstance(base, BoundedSession):
        return base
    if base is None:
        return BoundedSession(**kwargs)
    base._session._trainpipe_boto3_handlers = True  # made by boto3.Session, which registered them
    return BoundedSession(botocore_session=base._session, region_name=base.region_name)


def bounded(made, limit: float | None = None):
    """``made`` (a botocore client: one of ``client()``'s, or a test's with a Stubber) with each
    API call bounded by ``limit`` seconds; an already bounded client is returned as it is."""
    if isinstance(made, BoundedClient):
        return made
    return BoundedClient(made, deadline_seconds() if limit is None else limit)


class BoundedClient(S3Transfers):
    """A botocore client whose API calls, and each page a paginator fetches, end by a deadline.

    Object transfers end by a deadline that grows with their size (S3Transfers, inherited).
    Everything else (``meta``, ``exceptions``) is the client's own, so code written for a plain
    client works unchanged."""

    def __init__(self, made, limit: float):
        self._client, self.limit = made, limit

    @property
    def unbounded(self):
        """The client itself (for botocore's Stubber)."""
        return self._client

    def __getattr__(self, name: str):
        attribute = getattr(self._client, name)
        if name == "get_paginator":
            return self._paginator
        if name not in self._client.meta.method_to_api_mapping:
            return attribute
        operation = self._client.meta.method_to_api_mapping[name]
        sized = self._sized_call(name, operation, attribute)
        if sized is not None:
            return sized

        @functools.wraps(attribute)
        def call(*args, **kwargs):
            return call_by(lambda: attribute(*args, **kwargs), self.limit, lambda: self._missed(operation))

        return call

    def _bounded(self, made):
        """``made`` bounded as this client is (see ``bounded()``): S3Transfers' hook."""
        return bounded(made)

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
