"""SageMaker: a stopped job (StopTrainingJob, a tuning job's early stopping) gets SIGTERM, then a
grace period, and /opt/ml/model is uploaded. ``StopOnSigterm`` ends training at the next epoch end
instead of dying mid-step, so that rank 0 still saves the model it has, as the TensorFlow room's
callback of the same name does (``training_entry/run/callbacks.py``).

The handler only sets a flag. At each epoch end every rank contributes its flag to one all_reduce
(max), so every rank stops after the same epoch even where the signal reached only some of them:
a rank that left alone would leave the others waiting in the next epoch's collectives."""

from __future__ import annotations

import signal

import torch
import torch.distributed as dist


class StopOnSigterm:
    def __init__(self):
        self.requested = False  # SIGTERM arrived on this rank

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_sigterm)  # the main thread only, as Python requires

    def _on_sigterm(self, signum, frame) -> None:
        self.requested = True

    def agreed(self, device) -> bool:
        """Whether any rank got SIGTERM; every rank calls it once per epoch (a collective)."""
        flag = torch.tensor([1.0 if self.requested else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # torch.distributed: one scalar a rank
        return bool(flag.item() > 0)
