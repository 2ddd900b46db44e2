"""Whether the runner is waiting on a job's processes: the cue for work done beside the run.

Outside those waits the runner's own thread is the pipeline's critical path (reading the
definition, staging inputs, uploading outputs, the steps it runs itself). A helper thread in
the same process (the MLflow logging, ``pipeline/tracking/live.py``) would compete with it
for the interpreter's lock there and slow it; measured on the digits pipeline, importing
MLflow beside the preflight and the first job's staging cost the run ~0.4 s. While a job
runs, the runner's thread only polls, and the helper has the interpreter to itself.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

_lock = threading.Lock()
_waiting = 0  # jobs being waited on (a tuning step's trials wait side by side)
_event = threading.Event()


@contextmanager
def on_a_job():
    """Held while a job's processes run and the runner only waits for them."""
    global _waiting
    with _lock:
        _waiting += 1
        _event.set()
    try:
        yield
    finally:
        with _lock:
            _waiting -= 1
            if not _waiting:
                _event.clear()


def a_job_runs(timeout: float) -> bool:
    """Block until the runner waits on a job, or ``timeout`` seconds; whether it does."""
    return _event.wait(timeout)
