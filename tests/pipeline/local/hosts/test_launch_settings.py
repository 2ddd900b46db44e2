"""The local runner's fast launch defaults: who gets what, and what is left to the user."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.local.hosts import launch_settings
from training_entry.contract import SMALL_STEP_THREADS_ENV, TF_DATA_THREADS_ENV


def test_one_rank_gets_its_cores_as_intra_op_and_tf_data_threads_and_one_inter_op_thread():
    fast = launch_settings.local_launch(1, cpus=[0, 1], environ={})
    # ... and one for a small-step model (an MLP), which the entrypoint decides.
    assert fast.env == {"TF_NUM_INTRAOP_THREADS": "2", "OMP_NUM_THREADS": "2",
                        "TF_NUM_INTEROP_THREADS": "1", TF_DATA_THREADS_ENV: "2", SMALL_STEP_THREADS_ENV: "1"}
    assert fast.mpirun_options == ()  # nothing to yield to, no cycle to shorten, nothing to pin
    assert not fast.pin
    assert fast.threads == ("threads per rank: intra 2, inter 1, tf.data 2 "
                            f"(2 cores / 1 rank; {launch_settings.RANK_THREADS_ENV} overrides, 1 for an MLP)")


def test_small_step_threads_only_where_the_rule_gives_more_than_one_and_the_user_chose_none():
    assert SMALL_STEP_THREADS_ENV not in launch_settings.local_launch(2, cpus=[0, 1], environ={}).env  # 1 each already
    assert launch_settings.local_launch(2, cpus=list(range(8)), environ={}).env[SMALL_STEP_THREADS_ENV] == "1"
    overridden = launch_settings.local_launch(1, cpus=[0, 1], environ={launch_settings.RANK_THREADS_ENV: "2"})
    assert SMALL_STEP_THREADS_ENV not in overridden.env and "MLP" not in overridden.threads
    for chosen in ({"OMP_NUM_THREADS": "2"}, {SMALL_STEP_THREADS_ENV: "2"}):
        by_request = launch_settings.local_launch(1, cpus=[0, 1], request_env=chosen, environ={})
        by_runner = launch_settings.local_launch(1, cpus=[0, 1], environ=chosen)
        for fast in (by_request, by_runner):
            assert SMALL_STEP_THREADS_ENV not in fast.env and "MLP" not in fast.threads


def test_two_ranks_on_two_cores_one_thread_each_yield_pin_and_short_cycle():
    fast = launch_settings.local_launch(2, cpus=[0, 1], environ={})
    assert {fast.env[name] for name in (*launch_settings.THREAD_ENVS, TF_DATA_THREADS_ENV)} == {"1"}
    assert fast.env[launch_settings.CYCLE_TIME_ENV] == launch_settings.LOCAL_CYCLE_TIME_MS
    assert fast.env[launch_settings.AFFINITY_ENV] == "0,1"
    assert fast.mpirun_options == launch_settings.YIELD_OPTIONS
    assert fast.pin
    assert "intra 1, inter 1, tf.data 1 (2 cores / 2 ranks;" in fast.threads


def test_threads_are_cores_over_ranks_and_no_pinning_beyond_the_cores():
    eight = launch_settings.local_launch(2, cpus=list(range(8)), environ={}).env
    assert (eight["TF_NUM_INTRAOP_THREADS"], eight["TF_NUM_INTEROP_THREADS"], eight[TF_DATA_THREADS_ENV]) == ("4", "1", "4")
    crowded = launch_settings.local_launch(4, cpus=[0, 1], environ={})
    assert crowded.env["OMP_NUM_THREADS"] == "1"
    assert launch_settings.AFFINITY_ENV not in crowded.env and not crowded.pin
    # 3 ranks on 8 cores: each rank's whole share (2), never more threads than cores.
    assert launch_settings.rank_threads(3, 8) == launch_settings.RankThreads(2, 1, 2, cores=8, ranks=3)


@pytest.mark.parametrize(("value", "expected"), [
    ("1", (1, 1, 1)), (" 3 ", (3, 1, 3)), ("2,2,1", (2, 2, 1)), ("default", (0, 0, 0))])
def test_the_override_replaces_the_rule(value, expected):
    threads = launch_settings.rank_threads(1, 2, value)
    assert (threads.intra, threads.inter, threads.data) == expected and threads.overridden


def test_the_override_comes_from_the_request_then_the_runner_and_default_sets_nothing():
    name = launch_settings.RANK_THREADS_ENV
    assert launch_settings.override_from({name: "1"}, {name: "2"}) == "1"
    assert launch_settings.override_from({}, {name: "2"}) == "2"
    assert launch_settings.override_from(None, {}) is None
    one = launch_settings.local_launch(1, cpus=[0, 1], environ={name: "1"})
    assert one.env[TF_DATA_THREADS_ENV] == "1" and f"({name} set)" in one.threads
    default = launch_settings.local_launch(2, cpus=[0, 1], request_env={name: "default"}, environ={})
    assert not set(launch_settings.THREAD_ENVS) & set(default.env) and "TensorFlow's defaults" in default.threads
    assert default.env[launch_settings.CYCLE_TIME_ENV] == launch_settings.LOCAL_CYCLE_TIME_MS  # the rest stays


@pytest.mark.parametrize("value", ["two", "0", "1,2", "1,0,1", "-1"])
def test_a_bad_override_is_one_line_naming_the_variable_and_the_forms(value):
    with pytest.raises(ValueError, match=rf"^{launch_settings.RANK_THREADS_ENV}=.*give N .*INTRA,INTER,DATA.*'default'$"):
        launch_settings.rank_threads(2, 2, value)


def test_gpu_ranks_get_nothing():
    assert launch_settings.local_launch(2, cpus=[0, 1], gpus=2) == launch_settings.LocalLaunch()


def test_what_the_user_sets_wins():
    fast = launch_settings.local_launch(
        2, cpus=[0, 1], custom_mpi_options="-x HOROVOD_CYCLE_TIME=5 -x NCCL_DEBUG",
        request_env={"OMP_NUM_THREADS": "2"}, environ={})
    assert launch_settings.CYCLE_TIME_ENV not in fast.env and "OMP_NUM_THREADS" not in fast.env
    env = fast.apply_env({"TF_NUM_INTRAOP_THREADS": "3"})
    assert env["TF_NUM_INTRAOP_THREADS"] == "3"  # exported in the runner's shell
    assert env["TF_NUM_INTEROP_THREADS"] == "1"
    assert fast.threads.endswith("the job's own OMP_NUM_THREADS win")
    runner = launch_settings.local_launch(1, cpus=[0, 1], environ={"TF_NUM_INTEROP_THREADS": "4"})
    assert runner.threads.endswith("the job's own TF_NUM_INTEROP_THREADS win")
    assert runner.apply_env({"TF_NUM_INTEROP_THREADS": "4"})["TF_NUM_INTEROP_THREADS"] == "4"


def test_an_mca_parameter_the_job_sets_is_not_given_twice():
    # Open MPI refuses a parameter listed twice on the command line.
    fast = launch_settings.local_launch(2, cpus=[0, 1], custom_mpi_options="--mca mpi_yield_when_idle 0", environ={})
    assert fast.mpirun_options == ()
    assert launch_settings.mca_names("-mca btl self,vader -x A=1 --mca x 1") == {"btl", "x"}


def test_exported_names():
    assert launch_settings.exported_names("-x A=1 --mca x y -x B") == {"A", "B"}
    assert launch_settings.exported_names("") == set()


@pytest.mark.parametrize(("cpus", "rank", "expected"), [
    ("0,1", "0", 0), ("0,1", "1", 1), ("2,3", "3", 3), ("", "0", None), ("x", "0", None)])
def test_cpu_for_rank(cpus, rank, expected):
    assert launch_settings.cpu_for_rank({launch_settings.AFFINITY_ENV: cpus, launch_settings.RANK_ENV: rank}) == expected


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_shim_pins_then_execs():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    env = {**os.environ, launch_settings.AFFINITY_ENV: str(cpu), launch_settings.RANK_ENV: "0"}
    argv = launch_settings.shim_argv([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"])
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"[{cpu}]"


def test_tuning_imports_neither_tensorflow_nor_horovod():
    code = ("import sys; import pipeline.local.hosts.launch_settings; "
            "print([m for m in ('tensorflow', 'horovod', 'sagemaker') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cycle_time_variable_is_the_contracts():
    from training_entry.contract import HOROVOD_CYCLE_TIME_ENV

    assert launch_settings.CYCLE_TIME_ENV == HOROVOD_CYCLE_TIME_ENV
