"""Our Keras callbacks: the learning-rate schedule, per-epoch checkpoints, the metric line.
Horovod's own callbacks come from ``hvd.callbacks``; the test-only fault injector is in
``fault_injection.py``.

Python 3.10 syntax.
"""

from __future__ import annotations

import math
import signal
import time

import tensorflow as tf

from training_entry import contract
from training_entry.run import checkpoints, schedule


class LearningRateSchedule(tf.keras.callbacks.Callback):
    """Sets the optimizer's rate from the global (fractional) epoch before every call into the
    graph, so a resumed run (Keras passes the real epoch index from ``initial_epoch`` on)
    continues on the same curve. A call runs ``steps_per_execution`` steps (Keras passes the
    first one's index): during warm-up the rate rises in stairs of that many steps, each at
    the exact rate of its first step; with 1 it changes every step."""

    def __init__(self, base: float, size: int, warmup_epochs: float, steps_per_epoch: int,
                 factor: float = 1.0):
        super().__init__()
        self.base = base
        self.factor = factor  # transfer learning: lower for the fine-tuning phase
        self.size = size
        self.warmup_epochs = warmup_epochs
        self.steps_per_epoch = steps_per_epoch
        self.epoch = 0
        self.last = None

    def rate(self, epoch: int, step: int) -> float:
        position = schedule.global_epoch(epoch, step, self.steps_per_epoch)
        return self.factor * schedule.learning_rate(position, self.base, self.size, self.warmup_epochs)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        lr = self.rate(self.epoch, batch)
        if lr != self.last:  # constant after warm-up: skip the variable write
            tf.keras.backend.set_value(self.model.optimizer.learning_rate, lr)
            self.last = lr


class EpochCheckpoint(tf.keras.callbacks.Callback):
    """Rank 0: after every epoch, write the training state (see ``checkpoints``)."""

    def __init__(self, checkpoint: tf.train.Checkpoint, epoch_counter: tf.Variable, root: str, log):
        super().__init__()
        self.checkpoint = checkpoint
        self.epoch_counter = epoch_counter
        self.root = root
        self.log = log

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_counter.assign(epoch + 1)
        path = checkpoints.save(self.checkpoint, self.root, epoch + 1)
        self.log(f"checkpoint {path}")


def step_spread(seconds: list[float]) -> float | None:
    """Half the mean absolute difference between two of an epoch's steps, the first (the input
    pipeline's start, which every rank pays at once) left out; None under two steps.

    When ranks synchronise every step (the gradients' allreduce), each waits for the slowest:
    a step costs the mean of max(X, Y), not of X. For two ranks whose steps vary independently
    like these, E[max(X, Y)] - E[X] = E|X - Y| / 2: this figure. The scaling advisor
    (pipeline/costs/advisor) scales it to n ranks. Exact and O(n log n): sorted ascending,
    sum_i |x_i - x_j| over pairs = sum_i (2i - n + 1) x_i (0-based i)."""
    values = sorted(seconds[1:])
    n = len(values)
    if n < 2:
        return None
    return sum((2 * i - n + 1) * v for i, v in enumerate(values)) / (n * (n - 1))


def execution_step_spread(calls: list[tuple[float, int]]) -> float | None:
    """``step_spread`` of single steps, from calls into the graph of ``(seconds, steps)`` each
    (Keras ``steps_per_execution``; the callbacks see calls, not steps). With one step per
    call it is ``step_spread`` itself. Otherwise the spread of the full calls' mean step,
    times sqrt(steps): a mean of k independent steps varies sqrt(k) times less than one step.
    The epoch's last call, when shorter, is left out (its mean is not comparable)."""
    if not calls:
        return None
    size = max(steps for _, steps in calls)
    means = [seconds / steps for seconds, steps in calls if steps == size]
    spread = step_spread(means)
    return None if spread is None else spread * math.sqrt(size)


class MetricLine(tf.keras.callbacks.Callback):
    """Rank 0: the line SageMaker's metric regexes read, once per epoch. Runs after
    MetricAverageCallback, so the numbers are averages over all ranks. Throughput counts
    every rank's samples over the epoch's training time (validation excluded). Step time,
    its spread (``execution_step_spread``), this process's CPU seconds per step (every
    thread: TF's, tf.data's, Horovod's), the parameter count and the allreduce operations of
    a multi-rank step are what the scaling advisor fits."""

    def __init__(self, global_batch: int, steps_per_epoch: int, reducer=None, tracking=None):
        super().__init__()
        self.global_batch = global_batch
        self.steps_per_epoch = steps_per_epoch
        # flat_allreduce.FlatAllreduce (its allreduce operations per step), or None: one per
        # trainable variable, as Horovod's DistributedOptimizer reduces them.
        self.reducer = reducer
        # training_entry.tracking.JobRun on SageMaker with --tracking-uri, else None.
        self.tracking = tracking
        self.started = 0.0
        self.trained = 0.0
        self.cpu_started = 0.0
        self.cpu_trained = 0.0
        self.calls: list[tuple[float, int]] = []  # (seconds, steps) of this epoch's calls
        self.last_step = -1  # index of the last step the previous call ran

    def on_epoch_begin(self, epoch, logs=None):
        self.started = time.perf_counter()
        self.cpu_started = time.process_time()
        self.calls = []
        self.last_step = -1

    def on_train_batch_end(self, batch, logs=None):
        # Keras syncs every call for a callback with batch hooks: this is the call's end.
        # ``batch`` is the index of the call's last step (steps_per_execution > 1 runs several).
        now = time.perf_counter()
        self.calls.append((now - (self.trained if self.calls else self.started), batch - self.last_step))
        self.last_step = batch
        self.trained = now
        self.cpu_trained = time.process_time()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        seconds = max(self.trained - self.started, 1e-9)
        steps = max(self.steps_per_epoch, 1)
        metrics = {name: float(logs[name]) for name in contract.METRIC_KEYS if name in logs}
        metrics["throughput"] = self.global_batch * self.steps_per_epoch / seconds
        metrics["step_time"] = seconds / steps
        metrics["step_spread"] = execution_step_spread(self.calls)
        metrics["cpu_time"] = max(self.cpu_trained - self.cpu_started, 0.0) / steps
        metrics["parameters"] = float(self.model.count_params())
        operations = self.reducer.operations if self.reducer else None
        metrics["tensors"] = float(operations if operations is not None else len(self.model.trainable_variables))
        print(contract.format_metric_line(epoch + 1, metrics), flush=True)
        if self.tracking is not None:  # MLflow on SageMaker (training_entry/tracking.py)
            self.tracking.epoch(epoch + 1, metrics)


class StopOnSigterm(tf.keras.callbacks.Callback):
    """SageMaker: a stopped job (StopTrainingJob, a tuning job's early stopping) gets SIGTERM,
    then a grace period, and /opt/ml/model is uploaded. This ends training at the next epoch
    end instead of dying mid-step, so rank 0 still saves the model it has.

    ``install()`` sets the handler (main thread only); the handler only sets a flag. At each
    epoch end every rank contributes its flag to one allreduce (max), so all ranks stop after
    the same epoch, even where the signal reached only some of them.
    """

    def __init__(self, allreduce_max, log):
        super().__init__()
        self.allreduce_max = allreduce_max  # float -> the max over ranks (identity without Horovod)
        self.log = log
        self.requested = False  # SIGTERM arrived on this rank
        self.stopped_after: int | None = None  # the epoch (1-based) training stopped after

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum, frame) -> None:
        self.requested = True

    def on_epoch_end(self, epoch, logs=None):
        # Horovod: one scalar collective per epoch, called by every rank, so none waits alone.
        if self.allreduce_max(1.0 if self.requested else 0.0) > 0:
            self.model.stop_training = True
            self.stopped_after = epoch + 1
            self.log(f"stopped (SIGTERM) after epoch {epoch + 1}: saving the model trained so far")
