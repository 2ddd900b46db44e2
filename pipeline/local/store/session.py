"""Build a pipeline definition with the plain SageMaker SDK, offline, for ``run --local``.

The SDK uploads what a definition points at while it builds it: a ``ScriptProcessor``'s
``code``, an estimator's ``entry_point``/``source_dir`` (``sourcedir.tar.gz``), local
``inputs``. With this session those uploads land in trainpipe's local object store (or an
S3-compatible server), under the very ``s3://`` URIs the definition names, and nothing needs
AWS credentials, a network or Docker::

    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=".trainpipe", bucket="my-bucket")
    processor = SKLearnProcessor(..., sagemaker_session=session)
    ...
    pipeline = Pipeline(name="my-pipeline", steps=[...], sagemaker_session=session)
    Path("pipeline.json").write_text(pipeline.definition.build())

    $ trainpipe run --local --definition pipeline.json --workdir .trainpipe

``s3://bucket/key`` is the file ``<workdir>/store/bucket/key`` (``trainpipe store path``).
Pass ``s3_endpoint=URL`` to upload to MinIO or moto instead (then ``run --s3-endpoint URL``).
The role ARN can be anything well formed; ``default_bucket()`` is ``bucket``, nothing is
created or looked up.
"""

from __future__ import annotations

from pathlib import Path

from sagemaker.session import Session

from pipeline.definition.session import OfflinePipelineSession
from pipeline.local.store.storage import Boto3Storage, LocalStorage, Storage
from pipeline.workdir import resolve_workdir

DEFAULT_BUCKET = "trainpipe-local"
DEFAULT_ROLE = "arn:aws:iam::000000000000:role/trainpipe-local"


class _StoredObject:
    """What the SDK calls on ``s3_resource.Object(bucket, key)``: upload_file and put."""

    def __init__(self, storage: Storage, bucket: str, key: str):
        self.storage = storage
        self.uri = f"s3://{bucket}/{key}"

    def upload_file(self, Filename, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        self.storage.put_file(Path(Filename), self.uri)

    def put(self, Body=b"", **_):  # noqa: N803
        data = Body.encode() if isinstance(Body, str) else Body if isinstance(Body, bytes) else Body.read()
        self.storage.put_bytes(data, self.uri)


class _StoredBucket:
    """What the SDK calls on ``s3_resource.Bucket(name)`` (S3Uploader.upload_bytes and
    S3Downloader.read_bytes, which an ``@step`` function's serializer uses)."""

    def __init__(self, storage: Storage, name: str):
        self.storage = storage
        self.name = name

    def upload_fileobj(self, Fileobj, Key, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's names)
        self.storage.put_bytes(Fileobj.read(), f"s3://{self.name}/{Key}")

    def download_fileobj(self, Key, Fileobj, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803
        Fileobj.write(self.storage.read_bytes(f"s3://{self.name}/{Key}"))


class _StoreResource:
    """The part of ``boto3.resource("s3")`` the SDK uses to upload, backed by a Storage."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def Object(self, bucket_name=None, key=None, *args):  # noqa: N802 (boto3's name)
        return _StoredObject(self.storage, bucket_name, key)

    def Bucket(self, name):  # noqa: N802 (boto3's name)
        return _StoredBucket(self.storage, name)


class LocalStoreSession(OfflinePipelineSession):
    """A ``PipelineSession`` whose uploads go to trainpipe's store, never to AWS."""

    def __init__(self, workdir: str | Path | None = None, bucket: str = DEFAULT_BUCKET,
                 region: str = "us-east-1", *, s3_endpoint: str | None = None,
                 storage: Storage | None = None):
        if storage is None:
            if s3_endpoint:
                from pipeline.local.store.s3_endpoint import endpoint_client

                storage = Boto3Storage(endpoint_url=s3_endpoint, region=region,
                                       client=endpoint_client(s3_endpoint, region))
            else:
                # The workdir `trainpipe run --local` uses from here (pipeline/workdir.py).
                storage = LocalStorage(resolve_workdir(workdir).path / "store")
        super().__init__(region=region, bucket=bucket)
        self.storage = storage
        self.s3_resource = _StoreResource(storage)
        # SageMaker SDK: a Model's entry_point (SKLearnModel, ...) goes up as sourcedir.tar.gz
        # through boto_session.resource("s3"), not through s3_resource as an estimator's does.
        resource = self.boto_session.resource
        self.boto_session.resource = lambda name, *args, **kwargs: (
            self.s3_resource if name == "s3" else resource(name, *args, **kwargs))

    # SageMaker: uploads of local code and data (OfflinePipelineSession refuses them).
    def upload_data(self, *args, **kwargs):
        return Session.upload_data(self, *args, **kwargs)

    def upload_string_as_file_body(self, *args, **kwargs):
        return Session.upload_string_as_file_body(self, *args, **kwargs)

    def _get_account_id_if_default_bucket(self, bucket):
        return None  # no account to check ownership against: nothing is asked of AWS
