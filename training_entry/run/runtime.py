"""Process setup that is not Horovod's business: devices, threads, precision, logging.

Python 3.10 syntax.
"""

from __future__ import annotations

import os

import tensorflow as tf

from training_entry.contract import (
    SMALL_STEP_ARCHITECTURES,
    SMALL_STEP_THREADS_ENV,
    TF_DATA_THREADS_ENV,
)
from training_entry.failure import UserError

# Performance hook: how many threads TensorFlow may use per process. Unset: TF's default
# (all cores per rank, which oversubscribes a host running several ranks on CPU). The local
# runner sets both, and tf.data's private pool (TF_DATA_THREADS_ENV, read where the datasets
# are built), from the rank's share of the cores (pipeline/local/hosts/launch_settings.py).
INTRA_OP_THREADS_ENV = "TF_NUM_INTRAOP_THREADS"
INTER_OP_THREADS_ENV = "TF_NUM_INTEROP_THREADS"


def pin_gpu(local_rank: int) -> str:
    """One GPU per local rank, grown on demand; the CPU when there is none. Must run before
    TensorFlow creates its devices (before the first op)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "CPU"
    if local_rank >= len(gpus):
        raise UserError(
            f"local rank {local_rank} has no GPU: this host has {len(gpus)}; set "
            f"processes_per_host to at most {len(gpus)}"
        )
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.set_visible_devices(gpus[local_rank], "GPU")
    return gpus[local_rank].name


def thread_counts(env=None) -> tuple[int, int, int]:
    """(intra-op, inter-op, tf.data private pool) threads from the environment; 0 = the
    library decides. A value that is not a whole number is the user's error, named."""
    env = os.environ if env is None else env
    values = []
    for name in (INTRA_OP_THREADS_ENV, INTER_OP_THREADS_ENV, TF_DATA_THREADS_ENV):
        raw = env.get(name, "0") or "0"
        try:
            value = int(raw)
        except ValueError:
            raise UserError(f"{name}={raw!r} is not a whole number of threads") from None
        values.append(max(value, 0))
    intra, inter, data = values
    return intra, inter, data


def small_step_threads(architecture: str, env=None) -> str | None:
    """Local runs: for a model whose steps are too small to split (an MLP), lower the intra-op
    (and OpenMP) and tf.data threads in ``env`` to SMALL_STEP_THREADS_ENV's value, which the
    local runner sets beside its own thread choice and never where the user chose threads
    (pipeline/local/hosts/launch_settings.py, 5.). Call before ``set_threads_from_env``. Returns the
    job log's line, or None when nothing changed (SageMaker: the variable is never set)."""
    env = os.environ if env is None else env
    raw = env.get(SMALL_STEP_THREADS_ENV, "")
    if not raw or architecture not in SMALL_STEP_ARCHITECTURES:
        return None
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise UserError(f"{SMALL_STEP_THREADS_ENV}={raw!r}: give a whole number of threads >= 1")
    intra, _, data = thread_counts(env)
    if (intra and intra <= threads) and (data and data <= threads):
        return None
    for name in (INTRA_OP_THREADS_ENV, "OMP_NUM_THREADS", TF_DATA_THREADS_ENV):
        env[name] = str(threads)
    return (f"threads: intra-op and tf.data {threads}, not {intra or 'the default'}: the {architecture} model's "
            f"steps are too small to split ({SMALL_STEP_THREADS_ENV}, set by the local runner)")


def set_threads_from_env(env=None) -> tuple[int, int]:
    """Honour TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS (0 = TensorFlow decides), and
    check TF_DATA_THREADS_ENV here, before any dataset is built (datasets.py reads it)."""
    intra, inter, _ = thread_counts(env)
    if intra:
        tf.config.threading.set_intra_op_parallelism_threads(intra)
    if inter:
        tf.config.threading.set_inter_op_parallelism_threads(inter)
    return intra, inter


def set_precision_policy(name: str) -> None:
    """``off`` = float32; ``mixed_float16`` / ``mixed_bfloat16``: compute in 16 bits, keep
    float32 variables. Set before the model is built."""
    tf.keras.mixed_precision.set_global_policy("float32" if name == "off" else name)


class Log:
    """One line on stdout, from the chief only (every rank would repeat it)."""

    def __init__(self, chief: bool):
        self.chief = chief

    def __call__(self, message: str) -> None:
        if self.chief:
            print(f"trainpipe: {message}", flush=True)
