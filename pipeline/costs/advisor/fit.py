"""Fitting the step model to measured runs, and its error on them.

1. Compute, from the 1-rank runs of a platform: ``per_sample`` and ``fixed`` by least squares
   of step seconds on batch size (two or more batch sizes), else the whole step per sample;
   ``parallelism`` = median CPU seconds / wall seconds of those steps; ``spread`` (what
   synchronised ranks wait for each other) = the median of their step spreads.
2. Links, from an allreduce probe (``bytes -> seconds`` at 2 ranks): the ring formula at
   n = 2 is ``bytes / bw + 2 x latency``, a straight line in bytes; and a link's ``in_step``
   from the probe's step-shaped loop (``fit_in_step``).
3. Learning: with multi-rank runs of the platform, ``overlap`` and ``comm_scale`` are refit by
   a grid search minimising the squared log error of predicted step time; the report gives
   the error on every run seen (in sample) and leave-one-out (each multi-rank run predicted
   by a model fit without it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pipeline.costs.advisor.model import Layout, Link, Platform, StepModel
from pipeline.costs.advisor.observations import Observation
from pipeline.errors import UserError

OVERLAPS = [i / 10 for i in range(11)]
COMM_SCALES = [2 ** (i / 4) for i in range(-12, 17)]  # 1/8 .. 16


def _as_single(run: Observation, platform: Platform) -> Observation:
    """A multi-rank run's 1-rank equivalent: its step less the ring allreduce the link table
    gives (nothing hidden), undone of the core sharing (one core's worth per 1-rank step)."""
    probe = StepModel(per_sample=0.0, fixed=0.0, parallelism=1.0, parameters=run.parameters,
                      fp16_allreduce=run.fp16_allreduce, tensors=run.tensors)
    comm = probe.allreduce(run.layout, platform) + probe.in_step(run.layout, platform)
    share = 1.0 if platform.gpus_per_host else min(1.0, platform.cores_per_rank(run.layout))
    t1 = max(run.step_seconds - comm, 0.5 * run.step_seconds) * share
    return replace(run, layout=Layout(1, 1), step_seconds=t1, cpu_seconds=t1)


def call_spread(run: Observation) -> float:
    """The spread the wait term scales: that of the calls' mean step, undoing the metric's
    sqrt(steps per call). The metric (``callbacks.execution_step_spread``) times the spread
    of k-step calls' means by sqrt(k) to recover independent single steps; but what makes a
    rank wait on a shared machine is not independent per-step noise (each step is the same
    kernels on a pinned core) but spells that span steps: a scheduler slice given to another
    process (milliseconds, several steps of a small model) and the Python between calls
    (dispatch, callbacks, garbage collection), paid once per call. For a delay spanning a
    call, the other rank waits once per call for the difference of the calls' totals, i.e.
    per step for the difference of their means: the call spread, unscaled. sqrt(k) counted it
    4x at 16 steps per call (benchmarks/notes.md, P5: the 0.14 of the MLP, every prediction
    low). With one step per call both readings agree."""
    return run.step_spread / math.sqrt(max(run.steps_per_execution, 1))


def fit_compute(runs: Sequence[Observation], platform: Platform | None = None) -> StepModel:
    """The compute terms from 1-rank runs (any number, any batch sizes); without one, and
    given the platform, from the multi-rank runs with their modelled allreduce taken out."""
    single = [r for r in runs if r.layout.workers == 1]
    inferred = False
    if not single and platform is not None and runs:
        single, inferred = [_as_single(r, platform) for r in runs], True
    if not single:
        raise UserError("no 1-rank training run recorded: run once with TrainingInstanceCount=1 "
                        "ProcessesPerHost=1 (e.g. trainpipe run --local -p TrainingInstanceCount=1 "
                        "-p ProcessesPerHost=1) so the advisor can measure per-sample compute")
    notes = []
    # A 1-rank step that used less than one core's worth of CPU spent the rest waiting for a
    # core another process held (its inputs are prefetched by its own threads): its compute,
    # on a machine to itself, is its CPU time.
    starved = [r for r in single if r.cpu_seconds and r.cpu_seconds < r.step_seconds]
    if starved:
        single = [replace(r, step_seconds=r.cpu_seconds) if r in starved else r for r in single]
        notes.append(f"{len(starved)} 1-rank run(s) got less than one core (other processes): their "
                     "CPU seconds per step taken as the step")
    batches = sorted({r.batch for r in single})
    if len(batches) >= 2:
        xs = [float(r.batch) for r in single]
        ys = [r.step_seconds for r in single]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        fixed = my - slope * mx
        if slope <= 0 or fixed < 0:
            slope, fixed = statistics.median(y / x for x, y in zip(xs, ys, strict=True)), 0.0
            notes.append("batch sizes did not give a positive line; fixed per-step overhead set to 0")
        else:
            notes.append(f"per-sample/fixed split from 1-rank runs at batch sizes {batches}")
    else:
        slope = statistics.median(r.step_seconds / r.batch for r in single)
        fixed = 0.0
        notes.append(f"1-rank runs at one batch size ({batches[0]}): fixed per-step overhead not "
                     "separable, taken as 0 (predictions at other batch sizes scale linearly)")
    ratios = [r.cpu_seconds / r.step_seconds for r in single if r.cpu_seconds]
    parallelism = statistics.median(ratios) if ratios else 1.0
    parameters = statistics.median(r.parameters for r in runs)
    tensors = statistics.median(r.tensors for r in runs)
    spreads = [call_spread(r) for r in single if r.step_spread]
    spread = statistics.median(spreads) if spreads else 0.0
    if not spreads:
        notes.append("no step_spread_seconds metric in the 1-rank runs: no wait for the slowest rank "
                     "modelled (runs recorded before the metric)")
    if inferred:
        notes.append("no 1-rank run: compute inferred from multi-rank runs less their modelled allreduce "
                     "(run once with TrainingInstanceCount=1 ProcessesPerHost=1 to measure it)")
    return StepModel(per_sample=slope, fixed=fixed, parallelism=parallelism, parameters=int(parameters),
                     fp16_allreduce=any(r.fp16_allreduce for r in runs), tensors=int(tensors), spread=spread,
                     notes=notes)


def fit_link(probe: dict[int, float], ranks: int, source: str) -> Link:
    """Latency and bandwidth of a link from probe times (bytes -> seconds at ``ranks``).

    Siegel's repeated median (for each size the median slope to the others, then the median
    of those; then the median intercept): one probe size caught by a scheduling hiccup on a
    shared machine does not bend the line."""
    # bytes=0 is the probe's call without a collective: its overhead is not the link's.
    base = probe.get(0, 0.0)
    points = sorted((b, max(s - base, 0.0)) for b, s in probe.items() if b > 0)
    if len(points) < 2:
        raise UserError("the allreduce probe needs two or more sizes")
    factor = 2 * (ranks - 1) / ranks
    xy = [(factor * b, s) for b, s in points]
    slope = max(statistics.median(
        statistics.median((y2 - y1) / (x2 - x1) for x2, y2 in xy if x2 != x1) for x1, y1 in xy), 1e-12)
    intercept = max(statistics.median(y - slope * x for x, y in xy), 0.0)
    return Link(gbytes_per_s=1.0 / slope / 1e9, latency_s=intercept / (2 * (ranks - 1)), source=source)


def fit_in_step(shaped: float, alone: float, link: Link, nbytes: float, ranks: int, source: str) -> Link:
    """The link with its ``in_step``: a step-shaped loop's seconds per step (a kernel, then the
    allreduce of ``nbytes`` the next step waits for, on every rank at once) less the same
    kernel's seconds alone (before Horovod started: the 1-rank calibration's world) less the
    link's own allreduce of those bytes (the model's allreduce term). What is left is what the
    model has no other term for; below 0 (noise) it is 0."""
    extra = max(shaped - alone - link.ring_seconds(ranks, nbytes), 0.0)
    return replace(link, in_step_s=extra, in_step_source=source)


def _log_error(model: StepModel, runs: Sequence[Observation], platform: Platform) -> float:
    return sum(math.log(model.step(r.batch, r.layout, platform) / r.step_seconds) ** 2 for r in runs)


def refit_comm(model: StepModel, multi: Sequence[Observation], platform: Platform) -> StepModel:
    """``overlap`` and ``comm_scale`` that best explain the multi-rank runs (grid search)."""
    if not multi:
        return model
    best = min(((o, c) for o in OVERLAPS for c in COMM_SCALES),
               key=lambda oc: (_log_error(model.with_(overlap=oc[0], comm_scale=oc[1]), multi, platform),
                               abs(math.log(oc[1])), oc[0]))
    return model.with_(overlap=best[0], comm_scale=best[1],
                       notes=[*model.notes, f"overlap and comm_scale refit on {len(multi)} multi-rank run(s)"])


def fitted_parameters(runs: Sequence[Observation]) -> int:
    """How many of the step model's terms its runs determine: the per-sample time; the fixed
    per-step time where 1-rank runs have two batch sizes; the allreduce's overlap and scale
    where there are multi-rank runs. A fit has residuals, so an error that says anything,
    only from one run more than that (``advise.py`` recommends nothing from fewer)."""
    single = [r for r in runs if r.layout.workers == 1]
    return 1 + (len({r.batch for r in single}) >= 2) + 2 * any(r.layout.workers > 1 for r in runs)


def fit(runs: Sequence[Observation], platform: Platform) -> StepModel:
    model = fit_compute(runs, platform)
    return refit_comm(model, [r for r in runs if r.layout.workers > 1], platform)


@dataclass(frozen=True)
class ErrorReport:
    rows: list[tuple[str, str, float, float, float, float | None]]  # source, layout, measured, predicted, err, loo err

    @property
    def mean_abs(self) -> float | None:
        return statistics.fmean(abs(r[4]) for r in self.rows) if self.rows else None

    @property
    def worst_abs(self) -> float | None:
        return max(abs(r[4]) for r in self.rows) if self.rows else None

    def lines(self) -> list[str]:
        if not self.rows:
            return ["  (no runs to check the model against)"]
        out = [f"  {'run':40s} {'layout':6s} {'measured':>10s} {'predicted':>10s} {'error':>7s} {'leave-1-out':>11s}"]
        for source, layout, measured, predicted, err, loo in self.rows:
            out.append(f"  {source[-40:]:40s} {layout:6s} {measured:10.1f} {predicted:10.1f} {err:+7.1%} "
                       + (f"{loo:+11.1%}" if loo is not None else f"{'-':>11s}"))
        out.append(f"  mean |error| {self.mean_abs:.1%}, worst {self.worst_abs:.1%} (samples/s)")
        return out


def error_report(runs: Sequence[Observation], platform: Platform) -> ErrorReport:
    """Relative throughput error of the fitted model on every run, and leave-one-out on the
    multi-rank ones (a 1-rank run is the calibration itself)."""
    model = fit(runs, platform)
    rows = []
    for run in runs:
        predicted = model.throughput(run.batch, run.layout, platform)
        loo = None
        if run.layout.workers > 1:
            others = [r for r in runs if r is not run]
            try:
                held_out = fit(others, platform)
                loo = held_out.throughput(run.batch, run.layout, platform) / run.throughput - 1
            except UserError:  # nothing left to fit on
                loo = None
        rows.append((run.source, str(run.layout), run.throughput, predicted,
                     predicted / run.throughput - 1, loo))
    return ErrorReport(rows)


def layouts(max_workers: int, per_host: int) -> list[Layout]:
    """1..max_workers workers, filling hosts of ``per_host`` ranks (the last one may be partial
    only when fewer than one host's worth)."""
    out = []
    for n in range(1, max_workers + 1):
        if n <= per_host:
            out.append(Layout(1, n))
        elif n % per_host == 0:
            out.append(Layout(n // per_host, per_host))
    return out
