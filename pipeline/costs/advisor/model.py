"""The step-time model: compute (with the cores ranks share) + the allreduce not hidden behind
the backward pass. Every term is a named parameter, printed by ``describe()``.

For ``n = hosts x ranks_per_host`` workers, each with ``batch`` samples per step::

    compute(n)  = max(t1, cpu1 / cores_per_rank) x contention   on CPU ranks sharing cores
                = t1                                        on GPU ranks (one GPU each)
        t1   = fixed + batch x per_sample                   wall seconds of a 1-rank step
        cpu1 = t1 x parallelism                             its CPU seconds (measured)
        cores_per_rank = cores the ranks share / ranks sharing them
    bytes       = parameters x (2 if the allreduce is fp16 else 4)
    allreduce(n)= 2(n-1)/n x bytes / bandwidth + 2(n-1) x latency      (ring, fused into one
                  buffer: Horovod's tensor fusion), bandwidth and latency of the slowest link
                  (the network between hosts, else the intra-node link)
                  + (tensors - 1) x per_tensor     Horovod still handles each gradient tensor
                  as an operation of its own (enqueue, fusion copy, callback); per_tensor is
                  the platform's, measured by the allreduce probe (0 where not measured)
    exposed(n)  = max(0, allreduce(n) - overlap x backward(n)),  backward = 2/3 of compute
    wait(n)     = spread x E[max of n] / E[max of 2]   (0 for one worker)   ranks synchronise
                  every step (the allreduce), so each waits for the slowest of n: ``spread``
                  is half the mean absolute difference of two 1-rank calls' mean steps (the
                  metric line's ``step_spread_seconds`` less its sqrt(steps per call):
                  ``fit.call_spread`` says why), which is E[max(X, Y)] - E[X] for two ranks;
                  E[max of n] is that of n standard normals (0.564 at 2, 1.03 at 4, 1.42 at 8)
    in_step(n)  = the link's in_step (0 for one worker, and off a shared machine)   what a
                  collective issued inside a training step costs beyond the step's compute
                  alone and the bare allreduce: TF handing the tensor to Horovod's background
                  thread mid-graph and waiting on its callback, that thread cycling on the
                  rank's own core. Measured on this machine by the allreduce probe's
                  step-shaped loop (``fit.fit_in_step``); 0 where not measured
    step(n)     = compute(n) + wait(n) + in_step(n) + exposed(n)
    throughput  = n x batch / step(n)

``fixed``/``per_sample`` are split by a least-squares line through runs at two or more batch
sizes; from one batch size the whole step is ``per_sample`` (``fixed`` = 0), said so.
``overlap`` starts at 0 (TF's Keras step allreduces after the gradients, nothing hidden) and
``comm_scale`` (measured allreduce cost / the ring formula's) at 1, until multi-rank runs
refit them (``fit.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from statistics import NormalDist

BACKWARD_SHARE = 2.0 / 3.0  # backward ~ 2x forward: the part of compute an allreduce can hide behind


@cache
def expected_max_of_normals(n: int) -> float:
    """E[max of n independent standard normals] (0 for n = 1; 1/sqrt(pi) for n = 2), by the
    trapezoid rule on x n phi(x) Phi(x)^(n-1) over [-9, 9] (error < 1e-6 up to n = 10^4)."""
    if n <= 1:
        return 0.0
    normal, h = NormalDist(), 1e-3
    return h * sum(x * n * normal.pdf(x) * normal.cdf(x) ** (n - 1)
                   for x in (i * h for i in range(-9000, 9001)))


@dataclass(frozen=True)
class Link:
    """One class of link between ranks: seconds per byte-hop and per message."""

    gbytes_per_s: float
    latency_s: float
    source: str
    # Seconds per step a collective inside a training step adds beyond compute and the bare
    # allreduce on this link (``StepModel.in_step``), and where the figure comes from.
    in_step_s: float = 0.0
    in_step_source: str = "not measured"

    def ring_seconds(self, n: int, nbytes: float) -> float:
        if n <= 1:
            return 0.0
        return 2 * (n - 1) / n * nbytes / (self.gbytes_per_s * 1e9) + 2 * (n - 1) * self.latency_s


@dataclass(frozen=True)
class Layout:
    hosts: int
    ranks_per_host: int

    @property
    def workers(self) -> int:
        return self.hosts * self.ranks_per_host

    def __str__(self) -> str:
        return f"{self.hosts}x{self.ranks_per_host}"


@dataclass(frozen=True)
class Platform:
    """Where ranks run: cores they share (all simulated hosts share one machine locally),
    GPUs, and the links."""

    name: str
    cores_per_host: float
    gpus_per_host: int
    intra: Link
    inter: Link
    shared_machine: bool = False  # local: every simulated host's ranks share cores_per_host
    # Seconds each gradient tensor past the first adds to a step's allreduce (Horovod's
    # per-operation work on the host CPU), and where the figure comes from.
    per_tensor_s: float = 0.0
    per_tensor_source: str = "not measured: the gradients count as one fused tensor"

    def cores_per_rank(self, layout: Layout) -> float:
        sharing = layout.workers if self.shared_machine else layout.ranks_per_host
        return self.cores_per_host / max(sharing, 1)

    def link(self, layout: Layout) -> Link:
        return self.inter if layout.hosts > 1 else self.intra


@dataclass
class StepModel:
    per_sample: float  # s per sample of a 1-rank step
    fixed: float  # s per step
    parallelism: float  # cpu seconds / wall seconds of a 1-rank step (1 = one core's worth)
    parameters: int
    fp16_allreduce: bool = False
    overlap: float = 0.0
    comm_scale: float = 1.0
    # Ranks computing at once on CPUs of one machine slow each other (cores, caches, memory
    # bandwidth, Horovod's background threads): their step / the step of one rank alone.
    # Measured by the allreduce probe (benchmarks/advisor/advisor_probe.py); 1 when not measured.
    contention: float = 1.0
    tensors: int = 1  # gradient tensors per step (the model's trainable variables)
    # Half the mean absolute difference of two 1-rank calls' mean steps (s): what one of two
    # synchronised ranks waits for the other per step. 0 where not measured (runs before the metric).
    spread: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def gradient_bytes(self) -> float:
        return self.parameters * (2 if self.fp16_allreduce else 4)

    def t1(self, batch: int) -> float:
        return self.fixed + batch * self.per_sample

    def compute(self, batch: int, layout: Layout, platform: Platform) -> float:
        t1 = self.t1(batch)
        if platform.gpus_per_host:
            return t1
        shared = self.contention if layout.workers > 1 and platform.shared_machine else 1.0
        return max(t1, t1 * self.parallelism / platform.cores_per_rank(layout)) * shared

    def allreduce(self, layout: Layout, platform: Platform) -> float:
        if layout.workers <= 1:
            return 0.0
        per_tensor = max(self.tensors - 1, 0) * platform.per_tensor_s
        return self.comm_scale * (platform.link(layout).ring_seconds(layout.workers, self.gradient_bytes)
                                  + per_tensor)

    def wait(self, layout: Layout) -> float:
        """Per step, what a rank waits for the slowest of the others (0 for one worker)."""
        return self.spread * expected_max_of_normals(layout.workers) / expected_max_of_normals(2)

    def in_step(self, layout: Layout, platform: Platform) -> float:
        """Per step, what issuing the collective inside a step adds on a shared machine (the
        probe's step-shaped loop); 0 for one worker and on dedicated hosts, where nothing
        measured it."""
        if layout.workers <= 1 or not platform.shared_machine:
            return 0.0
        return platform.link(layout).in_step_s

    def step(self, batch: int, layout: Layout, platform: Platform) -> float:
        compute = self.compute(batch, layout, platform)
        hidden = self.overlap * BACKWARD_SHARE * compute
        return (compute + self.wait(layout) + self.in_step(layout, platform)
                + max(0.0, self.allreduce(layout, platform) - hidden))

    def throughput(self, batch: int, layout: Layout, platform: Platform) -> float:
        return layout.workers * batch / self.step(batch, layout, platform)

    def with_(self, **changes) -> StepModel:
        return replace(self, **changes)

    def describe(self, batch: int, platform: Platform) -> list[str]:
        intra, inter = platform.intra, platform.inter
        return [
            "step(n) = compute(n) + wait(n) + in_step(n) + max(0, allreduce(n) - overlap x 2/3 x compute(n))",
            f"  per-sample compute  {self.per_sample * 1e6:.4g} us/sample; fixed per step "
            f"{self.fixed * 1e3:.4g} ms; 1-rank step at batch {batch}: {self.t1(batch) * 1e3:.4g} ms",
            f"  CPU parallelism of a 1-rank step {self.parallelism:.3g} (cpu s / wall s); "
            f"{platform.cores_per_host:g} cores per host"
            + (" shared by every simulated host" if platform.shared_machine else ""),
            f"  ranks computing at once on this machine: x{self.contention:.3g} per step "
            "(measured alone vs together by the probe; 1 = not measured)",
            f"  gradient {self.parameters:,} parameters x {2 if self.fp16_allreduce else 4} B "
            f"({'fp16' if self.fp16_allreduce else 'fp32'} allreduce) = {self.gradient_bytes / 1e6:.4g} MB",
            f"  allreduce = {self.comm_scale:.3g} x [2(n-1)/n x bytes / bw + 2(n-1) x latency "
            "+ (tensors - 1) x per_tensor], fused",
            f"    intra-node {intra.gbytes_per_s:g} GB/s, {intra.latency_s * 1e6:.3g} us  [{intra.source}]",
            f"    inter-node {inter.gbytes_per_s:g} GB/s, {inter.latency_s * 1e6:.3g} us  [{inter.source}]",
            f"    {self.tensors} gradient tensor(s), {platform.per_tensor_s * 1e6:.3g} us per tensor past the "
            f"first  [{platform.per_tensor_source}]",
            f"  wait for the slowest rank = spread x E[max of n] / E[max of 2]: spread {self.spread * 1e3:.3g} ms "
            f"(half the mean |difference| of two 1-rank calls' mean steps; 0 = not measured), "
            f"{self.wait(Layout(1, 2)) * 1e3:.3g} ms at 2 workers, {self.wait(Layout(1, 8)) * 1e3:.3g} ms at 8",
            f"  collective inside a step, beyond compute and the bare allreduce (multi-rank, shared machine "
            f"only): intra-node {intra.in_step_s * 1e6:.3g} us [{intra.in_step_source}]; inter-node "
            f"{inter.in_step_s * 1e6:.3g} us [{inter.in_step_source}]",
            f"  overlap with the backward pass {self.overlap:.2f} (bounded by the measured compute)",
            *[f"  note: {n}" for n in self.notes],
        ]
