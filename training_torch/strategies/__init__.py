"""One module per way of spreading training over the ranks, each behind the same small
interface (``Strategy``), as ``torch.distributed.pipelining`` keeps one module per schedule:
``ddp`` (data parallel). Lines that exist only for a strategy carry its name (``# DDP:``)."""

from __future__ import annotations

from torch import nn


class Strategy:
    """``wrap`` the model and make its optimizer; ``step`` one batch (returns the loss and the
    batch's correct predictions, or ``(None, None)`` on a rank whose batch another rank counts:
    a GPipe stage before the last); ``module`` is the whole model to evaluate and export (every
    rank calls it before validation: GPipe gathers its stages there); ``report`` is the lines rank
    0 prints after an epoch's metrics (every rank calls it)."""

    name = "?"
    # How many consecutive local ranks hold one copy of the model and read the same batches
    # (GPipe: a host's ranks are one model's stages); 1 where every rank is a replica.
    ranks_per_replica = 1

    def configure(self, args, local_size: int) -> None:
        """Read the hyperparameters before any data or model (GPipe: micro-batches); refuse a
        combination that cannot work in one line (ValueError)."""

    def report(self) -> list[str]:
        return []

    def wrap(self, model: nn.Module, make_optimizer):  # -> (model to train, optimizer)
        raise NotImplementedError

    def step(self, model, optimizer, x, y, loss_fn):
        raise NotImplementedError

    def module(self, model) -> nn.Module:
        raise NotImplementedError

    def state_bytes(self, model, optimizer) -> int:
        """Bytes of parameters, gradients and optimizer state this rank holds."""
        tensors = list(model.parameters())
        tensors += [p.grad for p in model.parameters() if p.grad is not None]
        for state in optimizer.state.values():
            tensors += [v for v in state.values() if hasattr(v, "element_size")]
        return sum(t.numel() * t.element_size() for t in tensors)


def get(name: str) -> Strategy:
    """The strategy ``name`` (``training_entry.contract.TORCH_STRATEGIES``), its module imported
    only when chosen: DeepSpeed is imported by the ZeRO strategies alone."""
    from training_entry.contract import TORCH_DDP, TORCH_GPIPE, TORCH_STRATEGIES, TORCH_ZERO

    if name not in TORCH_STRATEGIES:
        raise ValueError(f"strategy {name!r} is not one of {', '.join(TORCH_STRATEGIES)}")
    if name == TORCH_DDP:
        from training_torch.strategies import ddp

        return ddp.DataParallel()
    if name in TORCH_ZERO:
        from training_torch.strategies import zero

        return zero.Zero(stage=TORCH_ZERO.index(name) + 1)
    if name == TORCH_GPIPE:
        from training_torch.strategies import gpipe

        return gpipe.GPipe()
    raise AssertionError(name)
