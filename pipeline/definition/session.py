"""An SDK session that builds definitions offline: no credentials, no network, no uploads.

The SDK would otherwise look up (or create) a default bucket, upload code, read config files
from disk and send telemetry. trainpipe uploads code itself (content-addressed, see
``bundles.py``), so any upload the SDK attempts is a bug and raises.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import sagemaker.utils
from sagemaker.workflow.pipeline_context import PipelineSession

from pipeline import aws_clients

# The SDK warns on every step built in a PipelineSession that no job starts: that is the point.
warnings.filterwarnings("ignore", message="Running within a PipelineSession", category=UserWarning)

# Telemetry off and no config files read: the definition depends on our inputs alone.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}


def _validate_each_config_once(validate):
    """The SDK checks its config against its JSON schema on every config lookup: about 60
    times per definition, 4-5 s of a 5 s build on 2 cores. A config that passed once passes
    again, so each distinct one is checked once (a bad one still raises every time)."""
    passed: set[str] = set()

    def once(sagemaker_config=None):
        key = json.dumps(sagemaker_config, sort_keys=True, default=str)
        if key not in passed:
            validate(sagemaker_config)
            passed.add(key)

    once.trainpipe_wrapped = True
    return once


if not getattr(sagemaker.utils.validate_sagemaker_config, "trainpipe_wrapped", False):
    sagemaker.utils.validate_sagemaker_config = _validate_each_config_once(
        sagemaker.utils.validate_sagemaker_config
    )


# MLflow's own variable (mlflow.set_tracking_uri also sets it for child processes).
MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"


@contextmanager
def sdk_blind_to_mlflow() -> Iterator[None]:
    """The SDK's ``EstimatorBase.fit`` forces ``wait=True`` when ``MLFLOW_TRACKING_URI`` is set
    and network isolation is on (sagemaker/estimator.py, to forward the job's metrics), even in
    a PipelineSession: building the definition then waits on a training job that was never
    created, with describe_training_job against AWS. A definition starts no job, so while the
    SDK builds one the variable is hidden from it (trainpipe's own tracking reads it before)."""
    saved = os.environ.pop(MLFLOW_TRACKING_URI, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[MLFLOW_TRACKING_URI] = saved


class OfflinePipelineSession(PipelineSession):
    def __init__(self, region: str, bucket: str, boto_session: boto3.Session | None = None):
        self._trainpipe_bucket = bucket
        if boto_session is None:
            # Fake credentials: building a definition signs no request.
            boto_session = boto3.Session(
                aws_access_key_id="offline", aws_secret_access_key="offline", region_name=region
            )
        # Every client the SDK makes from it (SageMaker, runtime, metrics, S3, and any it makes
        # later) is pipeline/aws_clients.py's, bounded as trainpipe's own are: should the SDK
        # ever ask something of AWS here, the call ends by its deadline.
        boto_session = aws_clients.session(boto_session)
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
