"""Process setup: thread-count hooks and device pinning on a machine without GPUs."""

from __future__ import annotations

import pytest

from training_entry.failure import UserError
from training_entry.run import runtime


def test_thread_hooks_unset_or_zero_leave_tensorflow_alone():
    assert runtime.set_threads_from_env({}) == (0, 0)
    assert runtime.set_threads_from_env({"TF_NUM_INTRAOP_THREADS": "0", "TF_NUM_INTEROP_THREADS": ""}) == (0, 0)


def test_thread_hook_must_be_a_number():
    with pytest.raises(UserError, match="TF_NUM_INTRAOP_THREADS='two' is not a whole number of threads"):
        runtime.set_threads_from_env({"TF_NUM_INTRAOP_THREADS": "two"})


def test_no_gpu_means_cpu():
    assert runtime.pin_gpu(local_rank=3) == "CPU"


def test_thread_counts_include_tf_datas_pool_and_name_a_bad_value():
    from training_entry.contract import TF_DATA_THREADS_ENV

    env = {"TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "1", TF_DATA_THREADS_ENV: "2"}
    assert runtime.thread_counts(env) == (2, 1, 2)
    assert runtime.thread_counts({}) == (0, 0, 0)
    with pytest.raises(UserError, match=f"{TF_DATA_THREADS_ENV}='x' is not a whole number of threads"):
        runtime.set_threads_from_env({TF_DATA_THREADS_ENV: "x"})


def test_a_small_step_model_takes_the_runners_small_step_threads_and_says_so():
    from training_entry.contract import (
        ARCH_MLP,
        ARCH_SMALL_CNN,
        SMALL_STEP_THREADS_ENV,
        TF_DATA_THREADS_ENV,
    )

    runner = {"TF_NUM_INTRAOP_THREADS": "2", "OMP_NUM_THREADS": "2", "TF_NUM_INTEROP_THREADS": "1",
              TF_DATA_THREADS_ENV: "2", SMALL_STEP_THREADS_ENV: "1"}
    cnn = dict(runner)
    assert runtime.small_step_threads(ARCH_SMALL_CNN, cnn) is None and cnn == runner
    mlp = dict(runner)
    note = runtime.small_step_threads(ARCH_MLP, mlp)
    assert runtime.thread_counts(mlp) == (1, 1, 1) and mlp["OMP_NUM_THREADS"] == "1"
    assert note.startswith("threads: intra-op and tf.data 1, not 2: the mlp model's steps are too small to split")
    # Not set (SageMaker, or where the user chose the threads): nothing changes.
    unset = {k: v for k, v in runner.items() if k != SMALL_STEP_THREADS_ENV}
    assert runtime.small_step_threads(ARCH_MLP, unset) is None and runtime.thread_counts(unset) == (2, 1, 2)
    with pytest.raises(UserError, match=f"{SMALL_STEP_THREADS_ENV}='0': give a whole number"):
        runtime.small_step_threads(ARCH_MLP, {**runner, SMALL_STEP_THREADS_ENV: "0"})
