"""An SDK session that builds definitions offline: no credentials, no network, no uploads.

The SDK would otherwise look up (or create) a default bucket, upload code, read config files
from disk and send telemetry. trainpipe uploads code itself (content-addressed, see
``bundles.py``), so any upload the SDK attempts is a bug and raises.
"""

from __future__ import annotations

import warnings

import boto3
from sagemaker.workflow.pipeline_context import PipelineSession

# Telemetry off and no config files read: the definition depends on our inputs alone.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}


class OfflinePipelineSession(PipelineSession):
    def __init__(self, region: str, bucket: str, boto_session: boto3.Session | None = None):
        self._trainpipe_bucket = bucket
        if boto_session is None:
            # Fake credentials: building a definition signs no request.
            boto_session = boto3.Session(
                aws_access_key_id="offline", aws_secret_access_key="offline", region_name=region
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            super().__init__(boto_session=boto_session, sagemaker_config=SDK_CONFIG)

    def default_bucket(self):
        return self._trainpipe_bucket

    def upload_data(self, *args, **kwargs):
        raise RuntimeError("the SDK tried to upload data while building a definition; "
                           "pass s3:// URIs (trainpipe uploads code itself)")

    def upload_string_as_file_body(self, *args, **kwargs):
        raise RuntimeError("the SDK tried to upload a file while building a definition")
