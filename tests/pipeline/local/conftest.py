"""Fixtures of the local-runner tests: storages (local directory and boto3 against moto)."""

from __future__ import annotations

import boto3
import pytest

from pipeline.local.store.storage import Boto3Storage, LocalStorage
from tests.moto_aws import moto_url  # noqa: F401  (a session fixture: one moto server on 127.0.0.1)

from .helpers import BUCKET


@pytest.fixture
def local_storage(tmp_path):
    return LocalStorage(tmp_path / "store")


@pytest.fixture
def s3_storage(moto_url):  # noqa: F811
    client = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1")
    for bucket in client.list_buckets().get("Buckets", []):
        # Other tests on the same moto server leave buckets of more than one page (upsert
        # uploads the 1,797 digits PNGs): list again until nothing is left, versions and
        # delete markers included (the infra stack's bucket is versioned).
        while True:
            listed = client.list_object_versions(Bucket=bucket["Name"])
            versions = listed.get("Versions", []) + listed.get("DeleteMarkers", [])
            if not versions:
                break
            client.delete_objects(Bucket=bucket["Name"], Delete={"Objects": [
                {"Key": v["Key"], "VersionId": v["VersionId"]} for v in versions[:1000]]})
        client.delete_bucket(Bucket=bucket["Name"])
    client.create_bucket(Bucket=BUCKET)
    return Boto3Storage(endpoint_url=moto_url, region="us-east-1")


@pytest.fixture(params=["local", "boto3"])
def storage(request):
    """Each storage test runs against both implementations."""
    return request.getfixturevalue("local_storage" if request.param == "local" else "s3_storage")
