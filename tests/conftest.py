"""Suite-wide isolation: no real AWS credentials, config or telemetry can leak into a test."""

from __future__ import annotations

import atexit
import os
import socket
import tempfile
from pathlib import Path

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

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """When the suite runs tests/test_readme.py with other tests (``make test``), record what
    every test prints and run test_readme.py last: its failure-table checks then read what the
    tests they name produced in this very session, rather than running them again (minutes)."""
    readme = [item for item in items if item.path.name == "test_readme.py"
              and item.path.parent == Path(__file__).parent]
    if not readme or len(readme) == len(items) or readme_record.recording():
        return
    items[:] = [item for item in items if item not in readme] + readme
    handle, path = tempfile.mkstemp(prefix="trainpipe-readme-messages-", suffix=".jsonl")
    os.close(handle)
    atexit.register(os.remove, path)
    os.environ[readme_record.ENV] = path
    readme_record.install()
    readme_record.SESSION = readme_record.Session(path)
    readme_record.SESSION.collected = {item.nodeid for item in items}


def pytest_runtest_logreport(report):
    if readme_record.SESSION is not None and report.when == "call" and report.passed:
        readme_record.SESSION.passed.add(report.nodeid)


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
