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
