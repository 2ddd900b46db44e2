"""P1's layouts: the single-process candidates get the threads TRAINPIPE_RANK_THREADS gives a
job, and every one of them is among the interleaved headline runs (no benchmark is run)."""

from __future__ import annotations

import pytest

from benchmarks.training.scaling import p1_local_scaling as p1
from pipeline.local.hosts import launch_settings
from training_entry.contract import TF_DATA_THREADS_ENV


@pytest.mark.parametrize("quick", [True, False])
def test_every_single_process_layout_is_a_headline_run(quick):
    headline = p1.headline_runs(quick, no_naive=False)
    assert headline[:3] == list(p1.SINGLE_PROCESS)
    assert "tuned_1x2" in headline
    assert ("naive_1x2" in headline) is quick and ("tuned_2x1" in headline) is not quick
    configs = p1.configurations(32, explore=False, quick=quick)
    assert set(headline) <= set(configs)


def test_growths_points_are_the_baseline_and_tuned_only():
    assert p1.headline_runs(True, no_naive=True) == ["one_process", "tuned_1x2"]


def test_single_process_threads_are_the_jobs_own(monkeypatch):
    monkeypatch.setenv(launch_settings.RANK_THREADS_ENV, "7")  # the shell's choice must not leak in
    cores = len(launch_settings.usable_cpus())
    assert p1.single_process(64, "default").env == {}
    one = p1.single_process(64, "1").env
    assert {one[k] for k in ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS", "TF_NUM_INTEROP_THREADS",
                             TF_DATA_THREADS_ENV)} == {"1"}
    rule = p1.single_process(64, None)
    assert rule.env["TF_NUM_INTRAOP_THREADS"] == rule.env[TF_DATA_THREADS_ENV] == str(cores)
    assert rule.env["TF_NUM_INTEROP_THREADS"] == str(launch_settings.INTER_OP_THREADS)
    assert (rule.ranks, rule.batch_size, rule.pin, tuple(rule.mpirun_options)) == (1, 64, False, ())


def test_the_mlps_rule_and_one_thread_are_one_layout_twice_where_the_rule_gives_more(monkeypatch):
    monkeypatch.setattr(launch_settings, "usable_cpus", lambda: [0, 1])
    assert p1.same_threads_twice(cnn=False)
    assert not p1.same_threads_twice(cnn=True)  # the CNN keeps the rule's threads
    monkeypatch.setattr(launch_settings, "usable_cpus", lambda: [0])
    assert not p1.same_threads_twice(cnn=False)  # one core: the rule already gives one thread
