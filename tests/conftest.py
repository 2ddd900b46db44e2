"""Suite-wide isolation: no real AWS credentials, config or telemetry can leak into a test."""

from __future__ import annotations

import os
import socket

import pytest

# Set before any test module imports boto3 or the SageMaker SDK.
for _key in list(os.environ):
    if _key.startswith(("TRAINPIPE_", "MLFLOW_")) or _key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        del os.environ[_key]
# No run logs to MLflow (a developer's team server least of all) but in the tests of tracking,
# which name their store: a new workdir's store costs every run seconds (pipeline/tracking).
from pipeline.tracking.target import OFF, SWITCH_ENV_VAR  # noqa: E402 (no imports of its own)

os.environ[SWITCH_ENV_VAR] = OFF
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
)


from tests import readme_record  # noqa: E402

if readme_record.recording():  # tests/test_readme.py is asking what the tests print
    readme_record.install()


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if anything opens a connection to anywhere but this machine."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not host.startswith(("127.", "localhost", "::1", "/")):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
