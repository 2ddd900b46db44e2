"""The Tracker's thread (``pipeline/tracking/live.py``) with a stand-in for MLflow: it logs
copies of the record, only while the runner waits on a job; it ends, with one warning line,
whatever happened (no job ran, no thread to be had, Ctrl-C once or twice); the thread's
warnings are dropped and the runner's are not. Seconds in all (no MLflow)."""

from __future__ import annotations

import time

import pytest

from pipeline.tracking import target as T
from pipeline.tracking.live import Tracker


class RecordedLog:
    """ExecutionLog's calls, noted: what the Tracker's thread asked MLflow for, and when."""

    calls: list = []
    fail: Exception | None = None

    def __init__(self, target, run_dir, storage, registry_path):
        self.entry = {"steps": {}, "link": "http://mlflow/#/run"}

    def ensure_parent(self, record):
        if RecordedLog.fail is not None:
            raise RecordedLog.fail
        self.entry["run_id"] = "parent"
        RecordedLog.calls.append(("parent", record.status))

    def log_step(self, record, step):
        if not self.entry["steps"].get(step.name):
            self.entry["steps"][step.name] = {"logged": True}
            RecordedLog.calls.append(("step", step.name, step.status, step.detail))

    def end_parent(self, record):
        self.entry["ended"] = True
        RecordedLog.calls.append(("end", record.status))


def quiet_tracker(monkeypatch, tmp_path, fail: Exception | None = None):
    from pipeline.tracking import live

    monkeypatch.setattr(live, "ExecutionLog", RecordedLog)
    monkeypatch.setattr(RecordedLog, "calls", [])
    monkeypatch.setattr(RecordedLog, "fail", fail)
    said: list[str] = []
    tracker = Tracker(T.embedded(tmp_path), tmp_path, None, said.append)
    tracker._warm_ups = []  # the imports ahead are an optimisation; seconds a test need not pay
    return tracker, said


def until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_tracker_logs_copies_and_only_while_the_runner_waits_on_a_job(monkeypatch, tmp_path):
    from pipeline.local.execution import ExecutionRecord, StepRecord
    from pipeline.local.hosts import waiting

    tracker, said = quiet_tracker(monkeypatch, tmp_path)
    record = ExecutionRecord("e-1", "tracked", str(tmp_path / "run"), {})
    tracker.started(record)
    step = StepRecord("Make", "Processing", status="Succeeded", detail="as it ended")
    record.steps.append(step)
    tracker.step_ended(record, step)
    step.detail = "changed by the runner afterwards"
    time.sleep(0.3)
    assert RecordedLog.calls == []  # the runner is busy, not waiting: nothing competes with it
    with waiting.on_a_job():
        until(lambda: len(RecordedLog.calls) == 2)
    assert RecordedLog.calls == [("parent", "Executing"), ("step", "Make", "Succeeded", "as it ended")]
    record.status = "Succeeded"
    tracker.ended(record)  # no job runs now: ended lifts the wait, and waits for the thread
    assert RecordedLog.calls[-1] == ("end", "Succeeded")
    assert said == [] and tracker.link() == "http://mlflow/#/run"


def test_a_failure_on_the_thread_is_one_warning_when_the_run_ends(monkeypatch, tmp_path):
    from pipeline.local.execution import ExecutionRecord

    tracker, said = quiet_tracker(monkeypatch, tmp_path, fail=ConnectionError("refused\nand more"))
    record = ExecutionRecord("e-2", "tracked", str(tmp_path / "run"), {})
    tracker.started(record)
    record.status = "Succeeded"
    tracker.ended(record)  # no job ever ran: still ends
    (warning,) = said
    assert warning.startswith(f"warning: MLflow tracking at {T.embedded(tmp_path).uri} failed (refused); "
                              f"not logged: the execution's run, the execution's end;")
    assert f"trainpipe track sync --workdir {tmp_path} --execution e-2" in warning
    assert tracker.link() is None


def test_warnings_on_the_trackers_thread_are_dropped_and_the_runners_are_not(monkeypatch, tmp_path):
    import threading
    import warnings

    from pipeline.tracking import live, logger

    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: shown.append(str(message)))
    silencer = live.ThreadWarnings()
    silencer.install()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            worker = threading.Thread(target=lambda: warnings.warn("from MLflow", stacklevel=1), name=logger.THREAD_NAME)
            worker.start()
            worker.join()
            warnings.warn("the runner's own", stacklevel=1)
    finally:
        silencer.remove()
    assert shown == ["the runner's own"]
    assert warnings.showwarning is not silencer


def test_no_thread_to_be_had_is_the_one_warning_and_never_fails_the_run(monkeypatch, tmp_path):
    import threading

    from pipeline.local.execution import ExecutionRecord

    tracker, said = quiet_tracker(monkeypatch, tmp_path)

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    record = ExecutionRecord("e-3", "tracked", str(tmp_path / "run"), {})
    tracker.started(record)  # never raises
    record.status = "Succeeded"
    tracker.ended(record)
    (warning,) = said
    assert "failed (no thread to log from: can't start new thread); not logged: the execution's run" in warning
    assert RecordedLog.calls == []


class InterruptedJoins:
    """The Tracker's thread as ``ended`` sees it, with Ctrl-C pressed during the first ``presses`` joins."""

    def __init__(self, thread, presses: int):
        self.thread, self.presses = thread, presses

    def join(self, timeout=None):
        if self.presses:
            self.presses -= 1
            raise KeyboardInterrupt
        self.thread.join(timeout)

    def is_alive(self):
        return self.thread.is_alive()


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_while_the_last_steps_are_logged_waits_once_and_stops_at_the_second(monkeypatch, tmp_path, presses):
    from pipeline.local.execution import ExecutionRecord

    tracker, said = quiet_tracker(monkeypatch, tmp_path)
    record = ExecutionRecord("e-4", "tracked", str(tmp_path / "run"), {})
    tracker.started(record)
    record.status = "Succeeded"
    thread = tracker._thread
    tracker._thread = InterruptedJoins(thread, presses)
    tracker.ended(record)
    thread.join()
    assert said[0].startswith("finishing the MLflow logging of the last steps (about a second); Ctrl-C again")
    if presses == 1:  # the run is over: the first Ctrl-C waits for the logging
        assert len(said) == 1 and RecordedLog.calls[-1] == ("end", "Succeeded")
    else:
        (warning,) = said[1:]
        assert "failed (interrupted before it finished)" in warning


def test_the_sync_command_names_a_server_that_never_answered(monkeypatch, tmp_path):
    from pipeline.local.execution import ExecutionRecord

    tracker, said = quiet_tracker(monkeypatch, tmp_path, fail=ConnectionError("refused"))
    tracker.target = T.Target("http://127.0.0.1:9", embedded=False)
    record = ExecutionRecord("e-5", "tracked", str(tmp_path / "run"), {})
    tracker.started(record)
    record.status = "Succeeded"
    tracker.ended(record)
    (warning,) = said
    assert f"`trainpipe track sync --workdir {tmp_path} --execution e-5 --tracking-uri http://127.0.0.1:9`" in warning
