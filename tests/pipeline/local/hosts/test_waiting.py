"""The cue for work beside the run (``pipeline/local/hosts/waiting.py``): set while any job is
waited on, nested waits (a tuning step's trials) included."""

from __future__ import annotations

import threading

from pipeline.local.hosts import waiting


def test_the_cue_holds_while_any_job_is_waited_on():
    assert not waiting.a_job_runs(0)
    with waiting.on_a_job():
        assert waiting.a_job_runs(0)
        with waiting.on_a_job():  # a second trial, side by side
            pass
        assert waiting.a_job_runs(0)  # the first is still waited on
    assert not waiting.a_job_runs(0)


def test_a_waiting_thread_wakes_when_a_job_starts():
    woke = []
    thread = threading.Thread(target=lambda: woke.append(waiting.a_job_runs(10)))
    thread.start()
    with waiting.on_a_job():
        thread.join(10)
    assert woke == [True]


def test_the_cue_clears_when_the_wait_ends_in_an_error():
    try:
        with waiting.on_a_job():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert not waiting.a_job_runs(0)
