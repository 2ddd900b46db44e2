"""An S3 client for ``--s3-endpoint URL`` (MinIO, moto, LocalStack): works with no AWS setup.

A local S3-compatible server does not check credentials, but boto3 refuses to sign a
request without any. When none are configured (environment, profile, instance role), the
client uses dummy ones, and says so once on stderr.
"""

from __future__ import annotations

import sys

DUMMY_KEY = "trainpipe-local"


def endpoint_client(url: str, region: str | None, say=None):
    import boto3

    from pipeline import aws_clients

    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        (say or _stderr)(f"note: no AWS credentials configured; using dummy ones "
                         f"({DUMMY_KEY}) for {url}, which a local S3-compatible server accepts")
        session = boto3.Session(aws_access_key_id=DUMMY_KEY, aws_secret_access_key=DUMMY_KEY,
                                region_name=region)
    return aws_clients.client(session, "s3", region=region or "us-east-1", endpoint_url=url)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
