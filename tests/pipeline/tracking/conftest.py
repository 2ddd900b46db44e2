"""Fixtures of the tracking tests: a real ``mlflow server`` on 127.0.0.1 (a free port, its own
SQLite store and artifact folder, stopped and started again on the same port and store as a
server going down and coming back), and a small definition whose steps are plain Python."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.local.store.storage import LocalStorage
from pipeline.tracking.logger import place_empty_store
from tests.pipeline.local.helpers import put_code, put_script
from tests.pipeline.local.test_runner import CODE, MAKE, TRAIN_CODE, step_definition

# Three epochs, each a metric line; "wait:PATH" holds the job until PATH exists (the test
# stops the tracking server meanwhile).
TRAIN = """
    import os, pathlib, time
    base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
    mode = os.environ.get("SM_HP_MODE", "ok")
    print("training started", flush=True)
    # What the chief's own MLflow run needs (training_entry/tracking.py): none, run locally.
    print("execution variable:", os.environ.get("TRAINPIPE_EXECUTION_ID"), flush=True)
    if mode.startswith("wait:"):
        release, deadline = pathlib.Path(mode[5:]), time.time() + 120
        while not release.exists() and time.time() < deadline:
            time.sleep(0.05)
    for epoch, score in enumerate([0.5, 0.6, 0.75], 1):
        print(f"epoch={epoch} score={score}", flush=True)
    (base / "model" / "weights.txt").write_text("w")
"""
EPOCH_SCORES = [0.5, 0.6, 0.75]


def small_definition(mode: str = "ok") -> dict:
    return step_definition(mode=mode)


def put_step_code(storage) -> None:
    put_script(storage, CODE, "make.py", MAKE)
    put_code(storage, TRAIN_CODE, {"train.py": TRAIN})


@pytest.fixture
def step_code(tmp_path):
    storage = LocalStorage(tmp_path / "store")
    put_step_code(storage)
    return storage


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MlflowServer:
    """``mlflow server`` as a team runs it: a SQLite backend store, artifacts served by it."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        # The store starts as trainpipe's embedded one does: a copy of an empty store (MLflow
        # would migrate a new one from its first revision, the slowest part of its start).
        place_empty_store(self.root / "server.db")
        mlflow = Path(sys.executable).with_name("mlflow")
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 (the process keeps it)
        self.process = subprocess.Popen(
            [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "1", "--backend-store-uri", f"sqlite:///{self.root / 'server.db'}",
             "--artifacts-destination", str(self.root / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            # Its background job runner (MLflow's GenAI jobs) has nothing to do here.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        deadline = time.monotonic() + 240  # a minute is usual on a busy 2-core machine
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("mlflow server exited: " + (self.root / "server.log").read_text()[-2000:])
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("mlflow server did not answer /health in 240 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # its gunicorn/uvicorn workers too
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


@pytest.fixture(scope="session")  # its start takes a minute on a busy machine: one for all
def mlflow_server(tmp_path_factory):
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    yield server
    server.stop()
