"""GPipe (Huang et al. 2019) through ``torch.distributed.pipelining``: the model cut into as many
stages as ranks per host (``networks.stages``: consecutive layers balanced by their measured
forward + backward time on one micro-batch, rank 0's measurement for every rank), each mini-batch into ``MicroBatches`` micro-batches run fill-drain by
``ScheduleGPipe`` (every forward, then every backward), data parallel across hosts: the same
stage on every host is one process group that averages its gradients after the schedule.

Layout: rank = host x K + stage (torchrun's order), so a host's K ranks are one pipeline and
are one data-parallel replica: they read the same shards and batches (``ranks_per_replica``);
stage 0 feeds the inputs, the last stage the labels and computes the loss.

What ``train.py`` gets back:
- ``step`` returns ``(None, None)`` on every stage but the last: only the last stage computes the
  loss, so it alone counts the batch (loss, correct predictions and examples); the epoch's sums
  over every rank then count each replica's examples once, and the averaged metrics and the
  throughput are right.
- ``module`` is the whole model: every rank holds the full ``nn.Sequential`` (its stage's layers
  are the ones it trains) and, on the first call after a step, gathers the other stages' weights
  from the ranks of its host (a collective, so every rank makes that call: ``train.py``'s
  validation does); calls before the next step (rank 0's parameter count, the export) reuse it.
- ``state_bytes`` counts the stage's training state (parameters, gradients, optimizer state),
  what GPipe partitions; the evaluation copy of the other stages is the export's, left out.
- ``report`` gives each stage's timeline: its busy intervals (forward, loss, backward of each
  micro-batch) per step, the measured idle (bubble) share beside GPipe's (K-1)/(M+K-1).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from training_entry import contract
from training_torch import networks, plan
from training_torch.strategies import Strategy

NAME = "gpipe"
LINE_PREFIX = "trainpipe-gpipe"


def expected_idle_share(stages: int, micro_batches: int) -> float:
    """GPipe's bubble: with K equal stages and M micro-batches a step lasts M+K-1 slots, each
    stage is busy for M of them."""
    return (stages - 1) / (micro_batches + stages - 1)


# The refusals live where the pipeline can ask them without torch (plan.py).
check = plan.check_gpipe


def split(model: nn.Sequential, count: int, costs: list[float] | None = None) -> list[nn.Sequential]:
    """``networks.stages``, its refusal in one line with the fix."""
    try:
        return networks.stages(model, count, costs)
    except ValueError as error:
        raise ValueError(f"strategy {NAME}: {error} (one per rank of a host): run fewer processes per host "
                         "or use ddp") from None


def idle_shares(steps_per_stage: list[list[tuple]]) -> list[tuple[float, float, float]]:
    """Per stage (busy seconds, window seconds, idle share) over the steps recorded.

    ``steps_per_stage[s][j]`` is stage s's step j: (start, end, [(label, t0, t1, cpu), ...]). A
    step's window is the first stage's: it feeds the first micro-batch in and takes the last
    gradient out, so every stage's work of the step lies inside it (the stages' clocks are one
    host's monotonic clock). Not the union of the stages' steps: a later stage starts its next
    step while the first still drains this one, so consecutive unions overlap and would count
    that wait twice. The optimizer's update between steps is outside every window, as in
    GPipe's account. Idle share = 1 - busy / window, both summed over the steps."""
    windows = [end - start for start, end, _ in steps_per_stage[0][:min(len(s) for s in steps_per_stage)]]
    total = sum(windows)
    out = []
    for steps in steps_per_stage:
        busy = sum(t1 - t0 for _, _, intervals in steps[:len(windows)] for _, t0, t1, *_ in intervals)
        out.append((busy, total, 1.0 - busy / total if total > 0 else float("nan")))
    return out


class _Timeline:
    """One stage's busy intervals per step: (start, end, [(label, t0, t1, cpu)]), wall-clock and
    the thread's CPU seconds within: where the machine's cores are shared, a preempted stage's
    interval lasts longer than it computes, and the two tell the schedule from the contention."""

    def __init__(self, cuda: bool):
        self.steps: list[tuple] = []
        self._current: tuple | None = None
        self._cuda = cuda  # a CUDA call returns before its kernels finish: wait for them to time them

    def begin(self) -> None:
        self._current = (time.perf_counter(), [])

    def end(self) -> None:
        start, intervals = self._current
        self.steps.append((start, time.perf_counter(), intervals))
        self._current = None

    def timed(self, fn, label: str, indexed: bool):
        def run(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                if self._cuda:
                    torch.cuda.synchronize()
                if self._current is not None:
                    self._current[1].append((f"{label}{args[0]}" if indexed else label, t0, time.perf_counter(),
                                             time.thread_time() - c0))
        return run

    def take(self) -> list[tuple]:
        steps, self.steps = self.steps, []
        return steps


class GPipe(Strategy):
    name = NAME

    def __init__(self, micro_batches: int = contract.DEFAULT_MICRO_BATCHES):
        self.micro_batches = micro_batches
        self.batch_size = 0
        self._schedule = None
        self._stale = False
        self._warm = False

    def configure(self, args, local_size: int) -> None:
        self.micro_batches, self.batch_size = args.micro_batches, args.batch_size
        self.image_size = getattr(args, "image_size", None)  # the shape of the micro-batch the cut is timed on
        check(local_size, self.batch_size, self.micro_batches)
        self.ranks_per_replica = local_size

    def wrap(self, model, make_optimizer):
        rank, world, k = dist.get_rank(), dist.get_world_size(), self.ranks_per_replica
        self._hosts, self._index = world // k, rank % k
        self._parts = split(model, k, self._costs(model))  # the parts share their layers with ``model``
        self._part = self._parts[self._index]
        # GPipe: every rank creates every group, in the same order (new_group is collective):
        # one pipeline per host (its stages' point-to-point sends), one group per stage across hosts.
        pipes = [dist.new_group(list(range(h * k, (h + 1) * k))) for h in range(self._hosts)]
        across = [dist.new_group(list(range(s, world, k))) for s in range(k)]
        self._pipe, self._across = pipes[rank // k], across[self._index]
        if self._hosts > 1:
            # GPipe: host 0's weights for this stage on every host (as DDP broadcasts rank 0's).
            for tensor in self._part.state_dict().values():
                dist.broadcast(tensor, src=self._index, group=self._across)
        device = next(model.parameters()).device
        self._timeline = _Timeline(device.type == "cuda")
        self._stage = PipelineStage(self._part, self._index, k, device, group=self._pipe)
        self._stage.forward_one_chunk = self._timeline.timed(self._stage.forward_one_chunk, "F", True)
        self._stage.backward_one_chunk = self._timeline.timed(self._stage.backward_one_chunk, "B", True)
        # The whole model goes back: train.py's model.train()/eval() then reach every layer,
        # the evaluation copy's dropout included. The optimizer holds this stage's parameters only.
        return model, make_optimizer(self._part.parameters())

    def _costs(self, model) -> list[float] | None:
        """GPipe: each layer's forward + backward seconds on one micro-batch, measured by rank 0 for
        every rank (the stages' cut must be the same on every host, and timings differ between
        ranks); None (parameter counts) where the model's input shape is unknown."""
        costs = [None]
        if dist.get_rank() == 0:
            # Its own random draws: the profile must not move the training's dropout masks.
            with torch.random.fork_rng(devices=[]):
                sample = networks.sample_input(model, max(1, self.batch_size // self.micro_batches), self.image_size)
                costs = [networks.layer_costs(model, sample) if sample is not None else None]
        dist.broadcast_object_list(costs, src=0)
        return costs[0]

    def step(self, model, optimizer, x, y, loss_fn):
        if self._schedule is None:
            # GPipe: scale_grads divides by M, so the gradient is the mini-batch mean's, as DDP's.
            self._schedule = ScheduleGPipe(self._stage, self.micro_batches,
                                           loss_fn=self._timeline.timed(loss_fn, "L", False))
        n = len(y)
        if n != self.batch_size:
            # GPipe: the stages' receive buffers keep the first step's micro-batch shape, so a
            # short batch (an epoch's last) is filled with its own examples; only its n count.
            fill = torch.arange(self.batch_size, device=y.device) % max(n, 1)
            x, y = x[fill], y[fill]
        optimizer.zero_grad(set_to_none=True)
        self._timeline.begin()
        if self._stage.is_first:
            self._schedule.step(x)
        elif self._stage.is_last:
            out = self._schedule.step(target=y, losses=[])
        else:
            self._schedule.step()
        self._timeline.end()
        if not self._warm:  # the first step infers shapes and warms the sends: not the schedule's
            self._timeline.take()
            self._warm = True
        self._average_across_hosts()
        optimizer.step()
        self._stale = True
        if not self._stage.is_last:
            return None, None  # GPipe: the last stage counts this batch (module docstring)
        with torch.no_grad():
            return loss_fn(out[:n], y[:n]).detach(), (out[:n].argmax(1) == y[:n]).sum()

    def _average_across_hosts(self) -> None:
        """GPipe: data parallel across hosts, one flat allreduce per stage and step."""
        if self._hosts < 2:
            return
        params = list(self._part.parameters())
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat, group=self._across)
        flat /= self._hosts
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))
            offset += p.numel()

    def module(self, model):
        if self._stale:
            # GPipe: every stage's weights from the ranks of this host, into the whole model.
            states: list = [None] * self.ranks_per_replica
            mine = {key: value.detach().cpu() for key, value in self._part.state_dict().items()}
            dist.all_gather_object(states, mine, group=self._pipe)
            for index, (part, state) in enumerate(zip(self._parts, states, strict=True)):
                if index != self._index:
                    part.load_state_dict(state)
            self._stale = False
        return model

    def state_bytes(self, model, optimizer) -> int:
        return super().state_bytes(self._part, optimizer)

    def report(self) -> list[str]:
        """Each stage's timeline since the last report (a collective within the host's pipeline):
        one line per stage with its measured idle share beside GPipe's, and the last step's
        intervals in milliseconds from that step's start. Host 0's pipeline is what rank 0 prints;
        every host runs the same schedule."""
        everyone: list = [None] * self.ranks_per_replica
        dist.all_gather_object(everyone, self._timeline.take(), group=self._pipe)
        if not all(everyone):
            return []
        expected = expected_idle_share(self.ranks_per_replica, self.micro_batches)
        last = min(len(steps) for steps in everyone) - 1
        origin = min(steps[last][0] for steps in everyone)
        lines = []
        for index, ((busy, window, idle), steps) in enumerate(zip(idle_shares(everyone), everyone, strict=True)):
            cpu = sum(i[3] for _, _, intervals in steps[:last + 1] for i in intervals)
            timeline = ",".join(f"{label}:{(t0 - origin) * 1e3:.2f}-{(t1 - origin) * 1e3:.2f}"
                                for label, t0, t1, _ in steps[last][2])
            lines.append(f"{LINE_PREFIX} stage={index} stages={self.ranks_per_replica} "
                         f"micro_batches={self.micro_batches} steps={last + 1} busy={busy:.4f} busy_cpu={cpu:.4f} window={window:.4f} "
                         f"idle_share={idle:.4f} gpipe_idle_share={expected:.4f} last_step_ms={timeline}")
        return lines
