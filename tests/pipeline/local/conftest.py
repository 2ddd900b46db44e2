"""Fixtures of the local-runner tests: storages (local directory and boto3 against moto)."""

from __future__ import annotations

import boto3
import pytest

from pipeline.local.storage import Boto3Storage, LocalStorage
from tests.moto_aws import moto_url  # noqa: F401  (a session fixture: one moto server on 127.0.0.1)

from .helpers import BUCKET


@pytest.fixture
def local_storage(tmp_path):
    return LocalStorage(tmp_path / "store")


@pytest.fixture
def s3_storage(moto_url):  # noqa: F811
    client = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1")
    for bucket in client.list_buckets().get("Buckets", []):
        objects = client.list_objects_v2(Bucket=bucket["Name"]).get("Contents", [])
        for obj in objects:
            client.delete_object(Bucket=bucket["Name"], Key=obj["Key"])
        client.delete_bucket(Bucket=bucket["Name"])
    client.create_bucket(Bucket=BUCKET)
    return Boto3Storage(endpoint_url=moto_url, region="us-east-1")


@pytest.fixture(params=["local", "boto3"])
def storage(request):
    """Each storage test runs against both implementations."""
    return request.getfixturevalue("local_storage" if request.param == "local" else "s3_storage")
