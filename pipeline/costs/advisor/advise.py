"""The advisor end to end: observations -> the runs of one workload -> a fitted model per
platform -> predictions for each candidate -> knee and recommendation -> report lines and a plot.

One workload at a time (``observations.WorkloadId``: architecture, data kind, input shape):
a step's cost is its model's on its input, so a fit across workloads explains none of them
(a penguins table, photos and the digits fitted as one erred by 159% on average). The user
names it (``--workload``), else the latest run's is taken; the others are listed with the
text that selects them. A platform whose fit errs, on the runs it has seen, by more than the
advisor promises (``PROMISED_ERROR``) is shown but recommends nothing, and says so.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.costs.accounting import Options
from pipeline.costs.advisor import fit as F
from pipeline.costs.advisor import gpus, input_rate
from pipeline.costs.advisor import platforms as PL
from pipeline.costs.advisor import plot as plotting
from pipeline.costs.advisor.model import Platform, StepModel
from pipeline.costs.advisor.observations import (
    TENSORFLOW_ENGINE,
    Observation,
    WorkloadId,
    local_observations,
    why_not_modelled,
)
from pipeline.costs.advisor.recommend import Row, Workload, choose, duration, predict, table
from pipeline.costs.prices import PriceBook
from pipeline.definition.parameters import BATCH_SIZE as P_BATCH
from pipeline.definition.parameters import TRAINING_INSTANCE_COUNT as P_COUNT
from pipeline.errors import UserError
from training_entry.input.records import KIND_IMAGE, KIND_TABLE

# What the advisor promises: its predicted samples/s within this of the runs it has seen, on
# average (the report's "mean |error|"). P5 holds the model to 0.10 on held-out runs and
# measured worst errors of 0.04-0.31 across make bench runs on this shared 2-core machine
# (BENCHMARKS.md); a mean beyond 0.20 means the fit is not explaining its runs (one model
# fitted across workloads erred by 159% on average), and nothing should rest on it.
PROMISED_ERROR = 0.20


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    models: dict[str, StepModel] = field(default_factory=dict)
    curves: dict[str, list[Row]] = field(default_factory=dict)
    errors: dict[str, F.ErrorReport] = field(default_factory=dict)
    choice: Row | None = None
    plot: Path | None = None
    workload: WorkloadId | None = None
    # Platforms whose fit errs beyond PROMISED_ERROR, and their curves: predicted, never recommended.
    untrusted: set[str] = field(default_factory=set)
    untrusted_curves: set[str] = field(default_factory=set)


def observations(workdir: Path) -> tuple[list[Observation], list[str]]:
    return local_observations(workdir)


def one_steps_per_execution(runs: list[Observation]) -> tuple[list[Observation], str | None]:
    """The runs at one StepsPerExecution (the one most runs used; the larger on a tie), and a
    note when others were left out: a step's fixed cost (Keras' dispatch, paid once per call)
    differs between them, so one model cannot fit both."""
    counts = Counter(run.steps_per_execution for run in runs)
    if len(counts) < 2:
        return runs, None
    kept = max(counts, key=lambda value: (counts[value], value))
    others = ", ".join(f"{counts[v]} at {v}" for v in sorted(counts) if v != kept)
    return ([r for r in runs if r.steps_per_execution == kept],
            f"modelling the {counts[kept]} run(s) at StepsPerExecution={kept}; left out {others} "
            f"(a step's fixed cost depends on it: run again at {kept} to use them)")


def workload_label(workload: WorkloadId, among: Iterable[WorkloadId] = ()) -> str:
    """What ``--workload`` takes to select it: the architecture and the shape, and its room
    where ``among`` holds the same network and shape from the other room."""
    words = [p for p in (workload.architecture, workload.shape) if p != "?"]
    if any(o != workload and (o.architecture, o.shape) == (workload.architecture, workload.shape) for o in among):
        words.append(workload.engine or TENSORFLOW_ENGINE)
    return " ".join(words) or "?"


def one_workload(runs: list[Observation], named: str | None) -> tuple[list[Observation], WorkloadId, list[str]]:
    """The runs of the workload ``named`` (``--workload``: words of its label), else of the
    latest run's; and the lines that say which, and what else was recorded."""
    by: dict[WorkloadId, list[Observation]] = defaultdict(list)
    for run in runs:
        by[run.workload].append(run)
    latest = {w: max(r.started for r in rs) for w, rs in by.items()}
    listed = [f"  {w.label}: {len(by[w])} run(s), latest {latest[w][:19] or '?'}"
              + (f"  (--workload \"{workload_label(w, by)}\")" if len(by) > 1 else "")
              for w in sorted(by, key=lambda w: latest[w], reverse=True)]
    if named:
        matching = [w for w in by if w.matches(named)]
        if len(matching) != 1:
            what = "none" if not matching else f"{len(matching)}"
            raise UserError(f"--workload {named!r} matches {what} of the recorded workloads "
                            f"({'; '.join(f'{workload_label(w, by)!r}: {w.label}' for w in (matching or by))}); "
                            "pass words that name one")
        chosen, why = matching[0], f"--workload {named!r}"
    else:
        chosen = max(by, key=lambda w: latest[w])
        why = "the latest run's" + ("; --workload selects another" if len(by) > 1 else "")
    lines = [f"workloads recorded ({len(by)}):", *listed, f"advising for: {chosen.label} ({why})"]
    return by[chosen], chosen, lines


def job_overhead(runs: list[Observation]) -> tuple[float, int]:
    """(the median of the jobs' wall seconds outside their epochs, how many jobs say it): a
    job's wall time less its epochs x train records / its measured samples/s."""
    spent = [o.job_seconds - o.epochs * o.train_records / o.throughput for o in runs
             if o.job_seconds is not None and o.epochs and o.train_records and o.throughput > 0]
    return (max(0.0, statistics.median(spent)), len(spent)) if spent else (0.0, 0)


def _platform_of(obs: Observation, workdir: Path) -> Platform | None:
    if obs.local:
        return PL.local_platform(obs.cores or 1, PL.load_probe(workdir))
    return PL.cloud_platform(obs.instance_type)


Candidates = dict[str, tuple[StepModel, Platform]]


def advise(observed: list[Observation], *, skipped: list[str], workdir: Path,
           instance_types: list[str] | None, max_workers: int, goal: str, budget: float | None,
           deadline_hours: float | None, knee_fraction: float, batch: int | None, epochs: int,
           samples_per_epoch: int, region: str, price_overrides: dict[str, float],
           options: Options, pricing_client=None, plot_path: Path | None = None,
           workload: str | None = None, default_samples_per_epoch: int | None = None) -> Report:
    """``samples_per_epoch`` None: the chosen workload's train records (its latest run's
    manifest), else ``default_samples_per_epoch``."""
    if not observed:
        raise UserError(f"no recorded training run with the advisor's metrics under {workdir}: "
                        "run `trainpipe run --local` (Epochs >= 2) first, or pass --workdir / --cloud")
    report = Report()
    everything = observed
    observed, report.workload, chosen_lines = one_workload(observed, workload)
    if samples_per_epoch is None:
        latest = max(observed, key=lambda r: r.started)
        samples_per_epoch = latest.train_records or default_samples_per_epoch
        if samples_per_epoch is None:
            raise UserError("--samples-per-epoch: the runs' data size is not recorded; pass it")
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observed:
        groups[obs.group].append(obs)  # platform, and strategy: never fitted together
    report.lines.append(f"trainpipe advise: {len(observed)} run(s) measured "
                        f"({', '.join(f'{k}: {len(v)}' for k, v in groups.items())})"
                        + (f" of {len(everything)} recorded" if len(everything) > len(observed) else ""))
    report.lines += chosen_lines
    report.lines += [f"  skipped {s}" for s in skipped[:10]]
    book = PriceBook(price_overrides, pricing_client)
    candidates = _fit_measured(report, groups, workdir, batch)
    latest = max(observed, key=lambda r: r.started)
    _add_unmeasured(report, candidates, instance_types or [], latest, workdir)
    if not candidates:
        raise UserError("no platform could be modelled: see the lines above")
    first = next(iter(groups.values()))[0]
    # A job is more than its epochs: TensorFlow's start-up, the data's first read, the model's
    # save. Predictions include what the measured jobs spent outside their epochs, so predicted
    # and measured times per run are on one basis (the plot draws both).
    overhead, measured_jobs = job_overhead(observed)
    workload = Workload(batch or first.batch, samples_per_epoch, epochs, overhead_seconds=overhead)
    if measured_jobs:
        report.lines.append(f"each predicted run includes {overhead:.1f} s of start-up and model save: the median "
                            f"of {measured_jobs} measured job(s)' wall time outside their epochs")
    _predict(report, candidates, workload, max_workers, book, region, options, knee_fraction)
    _recommend(report, goal, budget, deadline_hours, knee_fraction)
    if plot_path is not None:
        report.plot = plotting.save(plot_path, report.curves, observed,
                                    f"predicted throughput and cost per run ({workload.batch}/worker)")
        report.lines.append(f"plot: {report.plot}")
    return report


def _fit_measured(report: Report, groups: dict[str, list[Observation]], workdir: Path,
                  batch: int | None) -> Candidates:
    """A model per platform with measured runs (``groups`` keeps only the runs it fit on);
    a platform that cannot be modelled gets a line saying why."""
    out = report.lines
    candidates: Candidates = {}
    for name, runs in list(groups.items()):
        runs, note = one_steps_per_execution(runs)
        if note:
            groups[name] = runs
            out.append(f"  {name}: {note}")
        why_not = why_not_modelled(runs)
        if why_not:
            out.append(f"  {name}: {why_not}")
            continue
        platform = _platform_of(runs[0], workdir)
        if platform is None:
            out.append(f"  {name}: no hardware figures for this type; its runs are not used")
            continue
        try:
            model = F.fit(runs, platform)
        except UserError as error:
            out.append(f"  {name}: {error}")
            continue
        errors = F.error_report(runs, platform)
        report.models[name], report.errors[name] = model, errors
        run_batch = batch or runs[0].batch
        out += ["", f"model for {name} (fit on {len(runs)} run(s)):", *model.describe(run_batch, platform),
                "", f"its error on the runs it has seen ({name}):", *errors.lines()]
        mean = errors.mean_abs
        needed = F.fitted_parameters(runs) + 1
        if mean is not None and mean > PROMISED_ERROR:
            report.untrusted.add(name)
            out.append(f"  {name}: the fit errs by {mean:.1%} on average on the runs it has seen, above "
                       f"the {PROMISED_ERROR:.0%} the advisor promises: its predictions are shown, nothing "
                       "is recommended from them (runs taken while the machine was busy? run again)")
        elif len(runs) < needed:
            # An error on the very runs that set every term is 0 by construction: the 20%
            # safeguard above would pass a fit that has shown nothing.
            report.untrusted.add(name)
            out.append(f"  {name}: {len(runs)} run(s) for a fit of {needed - 1} term(s): its error on them shows "
                       f"nothing until it has {needed}; its predictions are shown, nothing is recommended from "
                       f"them: run again at another batch size or layout (e.g. -p {P_BATCH}=64, or -p "
                       f"{P_COUNT}=2)")
        candidates[name] = (model, platform)
    return candidates


def _add_unmeasured(report: Report, candidates: Candidates, instance_types: list[str],
                    latest: Observation, workdir: Path) -> None:
    """Instance types asked for without a run of their own: a CPU type predicted from the
    local model; a GPU type, for an image or table workload, from its two ceilings
    (``gpus.py``, either one alone where the other cannot be given, with why); otherwise a
    line saying what to do."""
    out = report.lines
    local = candidates.get("local")
    for itype in instance_types:
        if itype in candidates:
            continue
        platform = PL.cloud_platform(itype)
        if platform is None:
            out.append(f"  {itype}: no hardware figures (vCPUs, GPUs, network) for it; skipped")
        elif platform.gpus_per_host and _gpu_candidate(report, candidates, itype, platform, latest, workdir):
            continue
        elif platform.gpus_per_host:
            out.append(f"  {itype}: no measured run on it (GPU compute cannot be inferred from other "
                       f"hardware): run once with -p TrainingInstanceType={itype} "
                       "-p TrainingInstanceCount=1 on SageMaker, then advise --cloud")
        elif local is not None:
            # Overlap is the software's (TF + Horovod) and carries over; comm_scale was the
            # local links' and does not.
            model = local[0].with_(comm_scale=1.0, notes=[*local[0].notes, f"{itype}: per-core speed assumed equal to this machine's"])
            candidates[itype] = (model, platform)
            if "local" in report.untrusted:
                report.untrusted.add(itype)
            out.append(f"  {itype}: predicted from the local runs, assuming this machine's per-core speed")


def _gpu_candidate(report: Report, candidates: Candidates, itype: str, platform: Platform,
                   latest: Observation, workdir: Path) -> bool:
    """A GPU type predicted from the workload's latest local run: samples/s per GPU the lower
    of the compute and input ceilings (both printed with their sources, or why one cannot be
    given, then the binding one and what lifts it); the step model adds the allreduce over the
    type's links. An image run's compute ceiling needs an architecture whose FLOPs are
    counted, a table's MLP its parameter count; a model of the user's own has no count, and
    its input ceiling alone bounds the GPU. False where neither ceiling is known."""
    workload = latest.workload
    if workload.kind not in (KIND_IMAGE, KIND_TABLE):
        return False
    table = workload.kind == KIND_TABLE
    size = None if table or not workload.shape[:1].isdigit() else int(workload.shape.split("x")[0])
    unit = "rows" if table else "images"
    precision = gpus.AMP if latest.mixed_precision else gpus.FP32
    rate, rate_source = input_rate.per_core(workdir, latest, size)
    ceiling = gpus.ceilings(itype, workload.architecture, size, precision, rate, rate_source,
                            parameters=latest.parameters, unit=unit)
    if ceiling is None or ceiling.per_gpu is None:
        return False
    spec = f"{ceiling.gpus} GPU(s), {ceiling.cores_per_gpu:g} cores per GPU"
    out = report.lines
    out.append(f"  {itype} ({spec}): predicted from the {workload.label} runs here, before any job on it:")
    out.append(f"    compute ceiling {ceiling.compute:,.0f} {unit}/s per GPU: {ceiling.compute_source}"
               if ceiling.compute is not None else f"    compute ceiling unknown: {ceiling.compute_source}")
    out.append(f"    input ceiling   {ceiling.input:,.0f} {unit}/s per GPU: {ceiling.input_source} "
               "(a core there assumed as fast as one here)"
               if ceiling.input is not None else f"    input ceiling unknown: {ceiling.input_source}")
    if ceiling.input is None and table:
        # A table MLP's compute ceiling is a loose upper bound (launch-bound long before it):
        # alone, it would price a run at a fraction of what it will take.
        out.append(f"    {itype}: not priced: for a table only the input ceiling says what a GPU will do")
        return True
    out.append(f"    {itype}: {ceiling.fix(latest.resized_records)}")
    candidates[itype] = (StepModel(per_sample=1.0 / ceiling.per_gpu, fixed=0.0, parallelism=1.0,
                                   parameters=latest.parameters, fp16_allreduce=latest.fp16_allreduce,
                                   notes=[f"{itype}: {unit}/s per GPU from its ceilings (gpus.py), "
                                          "no overlap of the allreduce assumed"]), platform)
    return True


def _predict(report: Report, candidates: Candidates, workload: Workload, max_workers: int,
             book: PriceBook, region: str, options: Options, knee_fraction: float) -> None:
    """A curve (a row per worker count) for every shape of every candidate, as tables."""
    out = report.lines
    out += ["", f"predictions: batch {workload.batch} per worker, {workload.samples_per_epoch} samples per epoch, "
                f"{workload.epochs} epochs; knee: the last count whose added worker adds >= {knee_fraction:g} of "
                f"one worker's throughput"]
    notes: list[str] = []
    for name, (model, platform) in candidates.items():
        # Locally hosts are simulated on one machine: both shapes are a choice (1 host x N
        # ranks, N hosts x 1 rank); a SageMaker type gets one rank per GPU (per host on CPU).
        shapes = ({f"{name} 1 host": max_workers, f"{name} N hosts": 1} if platform.name == "local"
                  else {name: PL.ranks_per_host(name, platform)})
        for label, per_host in shapes.items():
            rows, also = predict(model, platform, workload, max_workers, per_host, book, region,
                                 options, knee_fraction)
            report.curves[label] = rows
            if name in report.untrusted:
                report.untrusted_curves.add(label)
            notes += also
            out += table(rows)
    out += [f"  {n}" for n in dict.fromkeys(notes)]
    if book.api_problem:
        out.append(f"  {book.api_problem}")


def _recommend(report: Report, goal: str, budget: float | None, deadline_hours: float | None,
               knee_fraction: float) -> None:
    """The row that best meets ``goal`` within the budget and deadline, over every curve."""
    out = report.lines
    out.append("")
    trusted = {label: rows for label, rows in report.curves.items() if label not in report.untrusted_curves}
    if not trusted:
        out.append(f"recommendation ({goal}): none: every fit errs beyond the {PROMISED_ERROR:.0%} the "
                   "advisor promises on the runs it has seen, or has too few runs to show its error (lines "
                   "above); no layout is recommended")
        return
    everything = [r for rows in trusted.values() for r in rows]
    choice, why = choose(everything, goal, budget, deadline_hours)
    report.choice = choice
    if choice is None:
        out.append(f"recommendation ({goal}, {why}): nothing fits; relax --budget/--deadline")
        return
    where = ("run --local" if choice.platform == "local" else f"TrainingInstanceType={choice.platform}")
    out.append(f"recommendation ({goal}, {why}): {where} TrainingInstanceCount={choice.layout.hosts} "
               f"x ProcessesPerHost={choice.layout.ranks_per_host} ({choice.layout.workers} workers): "
               f"{choice.throughput:.0f} samples/s, {duration(choice.run_hours)} per run"
               + (f", ${choice.cost_usd:.4f}" if choice.cost_usd is not None else "")
               + (f", {choice.co2e_kg:.3g} kg CO2e" if choice.co2e_kg is not None else ""))
    curve = next(rows for rows in report.curves.values() if choice in rows)
    knees = [r for r in curve if r.knee]
    if knees and knees[0].layout.workers < choice.layout.workers:
        out.append(f"  beyond the knee ({knees[0].layout.workers} workers): each added worker buys "
                   f"less than {knee_fraction:g} of its share")
