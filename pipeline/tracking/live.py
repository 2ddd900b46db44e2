"""Logging an execution to MLflow as it runs: the ``Tracker`` the CLI hands the local runner
(``RunOptions.tracker``), which calls it when the execution starts, when each step ends, and
when it ends. It never raises: see ``pipeline/tracking/logger.py``, which does the logging.
"""

from __future__ import annotations

import copy
import io
import queue
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from pipeline.local.execution import ExecutionRecord, StepRecord
from pipeline.local.hosts import waiting
from pipeline.local.store.storage import Storage
from pipeline.tracking import deadline
from pipeline.tracking.logger import (
    THREAD_NAME,
    ExecutionLog,
    http_defaults,
    quiet,
    sync_command,
    unlogged,
)
from pipeline.tracking.target import Target
from training_entry.contract import redact


class ThreadWarnings:
    """While installed (``warnings.showwarning``, from the runner's thread), warnings raised on
    the Tracker's thread are dropped and every other thread's are shown as before."""

    def __init__(self):
        self.previous = warnings.showwarning

    def __call__(self, message, category, filename, lineno, file=None, line=None):
        if threading.current_thread().name != THREAD_NAME:
            self.previous(message, category, filename, lineno, file, line)

    def install(self) -> None:
        warnings.showwarning = self

    def remove(self) -> None:
        if warnings.showwarning is self:  # not if something replaced it since
            warnings.showwarning = self.previous


WARM_UPS = ("import mlflow.pyfunc", "the requirements check", "the evaluation figures")


class Tracker:
    """What the runner calls (``RunOptions.tracker``): when the execution starts, when each
    step ends, and when it ends. Never raises; see the module docstring.

    The logging runs on a thread of its own, off the pipeline's critical path, and works only
    while the runner waits on a job (``pipeline/local/hosts/waiting.py``): importing MLflow,
    opening the store and the parent run (~2 s on 2 cores) overlap the first job, and each
    step is logged while the next one runs. The runner hands over a copy of the record as it
    stood (it goes on changing it). With nothing to log, the thread imports what the steps
    still to come will need (matplotlib for the evaluation's figures, MLflow's pyfunc saver
    and its installed-packages map, ~1 s together), so that logging the last steps, which no
    job overlaps, costs a fraction of a second. ``ended`` lifts the wait for a job and waits
    for the thread: what the execution's records say is in MLflow when the command returns.
    What a step's run carries from the store (``evaluation.json``, the model) and the registry
    (the package's approval status) is read when the thread logs it, later than the step's end:
    each execution's store keys are its own, and a package approved in between is logged as
    approved."""

    def __init__(self, target: Target, workdir: Path, storage: Storage, say: Callable[[str], None]):
        self.target = target
        self.workdir = Path(workdir)
        self.storage = storage
        self.say = say
        self.log: ExecutionLog | None = None
        self.error: str | None = None
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._warm_ups = list(WARM_UPS)
        self._closing = threading.Event()  # the execution ended: no job to wait for any more
        self._warnings = ThreadWarnings()
        self._failed_at_start = False
        self._limit = deadline.seconds()  # a bad setting is refused here, before the run starts

    # -- the runner's side: hand over, never wait (but at the end) --
    def started(self, record: ExecutionRecord) -> None:
        http_defaults()  # os.environ is changed here, on the runner's thread, never beside it
        self._queue.put((self._start, copy.deepcopy(record), None))  # before any warm-up
        thread = threading.Thread(target=self._work, name=THREAD_NAME, daemon=True)
        self._warnings.install()
        try:
            thread.start()
        except RuntimeError as error:  # no thread to be had (the machine's process limit)
            self._warnings.remove()
            self.error = f"no thread to log from: {error}"
            self.log = None
            self._failed_at_start = True
            return
        self._thread = thread

    def step_ended(self, record: ExecutionRecord, step: StepRecord) -> None:
        if self._thread is not None:
            snapshot = copy.deepcopy(record)
            self._queue.put((self._step, snapshot, snapshot.step(step.name) or copy.deepcopy(step)))

    def ended(self, record: ExecutionRecord) -> None:
        if self._thread is None and not self._failed_at_start:  # it never started (nothing ran)
            return
        if self._thread is not None:
            self._queue.put((self._end, copy.deepcopy(record), None))
            self._queue.put(None)
            self._closing.set()
            # The pipeline is over: the logging may hold the command only so long. A server
            # that trickles bytes keeps each read inside MLflow's timeout and a call going for
            # ever; the thread is a daemon, left to the process's exit (deadline.py).
            limit = self._limit
            ends = time.monotonic() + limit
            try:
                try:
                    self._thread.join(max(0.0, ends - time.monotonic()))
                except KeyboardInterrupt:  # the run is over: the first Ctrl-C only says so
                    self.say("finishing the MLflow logging of the last steps (about a second); "
                             "Ctrl-C again stops it, and `trainpipe track sync` logs the rest later")
                    self._thread.join(max(0.0, ends - time.monotonic()))
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting; the records keep the rest
                self.error = self.error or "interrupted before it finished"
            if self.error is None and self._thread.is_alive():
                self.error = deadline.missed(limit)
            self._warnings.remove()
            if self.error is None and unlogged(record, self.log.entry if self.log else None):
                self.error = "its thread ended before it had logged everything"  # a BaseException there
        if self.error is None:
            return
        missing = unlogged(record, self.log.entry if self.log else None)
        self.say(f"warning: MLflow tracking at {self.target.display} failed ({self.error}); not logged: "
                 f"{', '.join(missing)}; the run is not affected: `{sync_command(self.workdir, record.execution_id, self.target)}` "
                 f"logs them from this execution's records")

    def link(self) -> str | None:
        return (self.log.entry.get("link") if self.log else None) if self.error is None else None

    # -- the thread's side --
    def _work(self) -> None:
        while True:
            self._while_a_job_runs()
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                if self._warm_ups and self.error is None:
                    self._warm_up(self._warm_ups.pop(0))
                    continue
                item = self._queue.get()
                self._while_a_job_runs()
            if item is None:
                return
            action, record, step = item
            self._guard(lambda: action(record, step))  # noqa: B023 (called at once)

    def _while_a_job_runs(self) -> None:
        while not self._closing.is_set() and not waiting.a_job_runs(0.05):
            pass

    def _guard(self, action: Callable[[], None]) -> None:
        if self.error is not None:
            return
        try:
            # MLflow's loggers quieted for the call (their levels are the process's: the
            # runner's own lines from them wait too); its warnings: _ThreadWarnings.
            with quiet():
                action()
        except Exception as error:  # noqa: BLE001 (a tracking failure never fails the pipeline)
            self.error = redact((str(error).strip().splitlines() or [type(error).__name__])[0])[:200]

    def _start(self, record: ExecutionRecord, _step) -> None:
        self.log = ExecutionLog(self.target, Path(record.run_dir), self.storage,
                                self.workdir / "registry.sqlite")
        self.log.ensure_parent(record)

    def _step(self, record: ExecutionRecord, step: StepRecord) -> None:
        self.log.log_step(record, step)

    def _end(self, record: ExecutionRecord, _step) -> None:
        for step in record.steps:  # the step a stop (Ctrl-C) cut short: its run ends KILLED
            self.log.log_step(record, step)
        self.log.end_parent(record)

    @staticmethod
    def _warm_up(what: str) -> None:
        """Import ahead what a later step's logging needs; a failure here is the step's to say."""
        try:
            with quiet():
                if what == WARM_UPS[0]:
                    import mlflow.pyfunc  # noqa: F401
                elif what == WARM_UPS[1]:
                    # save_model checks the model's pip requirements against what is installed:
                    # MLflow maps every installed distribution to its modules once per process.
                    from mlflow.utils import requirements_utils

                    requirements_utils._init_packages_to_modules_map()
                else:  # the first drawing loads the fonts: one tiny figure drawn
                    from matplotlib.figure import Figure

                    from pipeline import figures  # noqa: F401

                    figure = Figure(figsize=(1, 1))
                    figure.subplots().set_title("0")
                    figure.savefig(io.BytesIO(), format="png")
        except Exception:  # noqa: BLE001, S110 (an optimisation only)
            pass
