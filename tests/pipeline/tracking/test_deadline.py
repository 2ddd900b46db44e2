"""Every call to a tracking server has a deadline for the whole call (``pipeline/tracking/deadline.py``):
a server on 127.0.0.1 that trickles one byte a second never trips MLflow's per-read timeout
(10 s), yet ``run --local`` ends within its deadline with the pipeline's true result and one
warning line, and ``track sync`` ends with one line and exit 1. Through the CLI's process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.local.store.storage import LocalStorage
from pipeline.tracking import deadline
from pipeline.tracking import target as T
from tests import readme_record

from .conftest import put_step_code, small_definition

REPO = Path(__file__).resolve().parents[3]
DEADLINE_S = 3
# For a call that returns at once: it runs on a thread, which a loaded 2-core CI machine may not
# schedule for a second or more; only the stalled call below is meant to miss its deadline.
ANSWERS_WITHIN_S = 60


class TricklingServer:
    """Answers every request with one byte of a never-ending status line a second, for 120 s at most."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.uri = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopped = threading.Event()
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.sock.accept()
            except OSError:
                continue
            self.requests += 1
            threading.Thread(target=self._trickle, args=(connection,), daemon=True).start()

    def _trickle(self, connection: socket.socket) -> None:
        ends = time.monotonic() + 120
        with connection:
            try:
                connection.settimeout(1)
                connection.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nX-Trickle: " + b"a" * 200:
                    if self.stopped.is_set() or time.monotonic() > ends:
                        return
                    connection.sendall(bytes([byte]))
                    time.sleep(1)
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture
def trickling():
    server = TricklingServer()
    yield server
    server.close()


def trainpipe(*args: str, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k not in (T.SWITCH_ENV_VAR, T.ENV_VAR)}
    env[deadline.ENV_VAR] = str(DEADLINE_S)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=env)
    return done, time.monotonic() - started


@pytest.mark.slow  # a whole (small) pipeline through the CLI, then track sync: ~25 s on 2 cores
def test_a_trickling_server_costs_run_and_sync_their_deadline_and_one_line(tmp_path, trickling):
    workdir = tmp_path / "work"
    put_step_code(LocalStorage(workdir / "store"))
    definition = tmp_path / "tracked.json"
    definition.write_text(json.dumps(small_definition()))
    done, _ = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                        "--tracking-uri", trickling.uri, timeout=120)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0, "\n".join(lines[-30:])
    assert trickling.requests >= 1  # MLflow did reach it, and was kept waiting
    mentions = [line for line in lines if "mlflow" in line.lower()]
    (warning,) = mentions
    assert warning.startswith(f"warning: MLflow tracking at {trickling.uri} failed (no complete answer "
                              f"within {DEADLINE_S} s ({deadline.ENV_VAR})); not logged: the execution's run")
    assert [line for line in lines if line.endswith("Succeeded")], lines[-10:]

    sync, _ = trainpipe("track", "sync", "--workdir", str(workdir), "--tracking-uri", trickling.uri,
                           timeout=60)
    assert sync.returncode == 1, sync.stdout + sync.stderr
    (execution_id,) = [p.name for p in (workdir / "runs").iterdir()]
    readme_record.record(sync.stdout)
    assert sync.stdout.splitlines()[0] == (f"execution {execution_id}: cannot log to {trickling.uri}: no complete "
                                           f"answer within {DEADLINE_S} s ({deadline.ENV_VAR})")
    # It ended by the deadline, not the trickle's 200 s: the line names the deadline, and the
    # command ended within its 60 s timeout (no wait for the stalled thread at exit).


def test_the_deadline_is_the_whole_call_and_hands_back_results_and_errors():
    assert deadline.call(lambda: 7, ANSWERS_WITHIN_S) == 7
    with pytest.raises(KeyError):
        deadline.call(lambda: {}["missing"], ANSWERS_WITHIN_S)
    release, finished = threading.Event(), threading.Event()

    def stalled():  # a call that goes on until the test lets it end
        release.wait(60)
        finished.set()

    with pytest.raises(deadline.DeadlineExceeded, match="no complete answer within 0.2 s"):
        deadline.call(stalled, 0.2)
    assert not finished.is_set()  # the caller stopped waiting; the call itself was still going
    release.set()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_deadline_that_is_not_a_positive_number_is_refused_in_one_line(value):
    with pytest.raises(UserError) as refused:
        deadline.seconds({deadline.ENV_VAR: value})
    assert str(refused.value) == (f"{deadline.ENV_VAR}={value!r} is not a positive number of seconds; set it "
                                  f"to one (e.g. {deadline.ENV_VAR}=30) or unset it")
    assert deadline.seconds({}) == 30
