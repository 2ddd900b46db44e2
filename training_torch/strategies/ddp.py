"""DDP: Horovod's recipe in PyTorch. ``DistributedDataParallel`` broadcasts rank 0's weights
when it wraps the model and averages every gradient in buckets during the backward pass."""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from training_torch.strategies import Strategy

NAME = "ddp"


class DataParallel(Strategy):
    name = NAME
    # DDP: True where some parameters get no gradient in some steps (a frozen backbone's, in the
    # fine-tuning's head phase: train.py); DDP then finds them from the autograd graph each step
    # instead of waiting for their gradients forever.
    find_unused_parameters = False

    def wrap(self, model, make_optimizer):
        device_ids = [torch.cuda.current_device()] if torch.cuda.is_available() else None
        # DDP: rank 0's weights are broadcast here, so every rank starts from the same model.
        wrapped = DistributedDataParallel(model, device_ids=device_ids,
                                          find_unused_parameters=self.find_unused_parameters)
        return wrapped, make_optimizer(wrapped.parameters())

    def step(self, model, optimizer, x, y, loss_fn):
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()  # DDP: gradients averaged over every rank as they are computed
        optimizer.step()
        return loss.detach(), (logits.argmax(1) == y).sum()

    def module(self, model):
        return model.module
