"""A HyperparameterTuningJob run on this machine: the trials are training jobs, run by the same
``TrainingJob`` as a Training step (hosts, channels, Pipe mode, namespaces, MPI), side by side
up to ``MaxParallelTrainingJobs``, each on its share of this machine's cores.

SageMaker's own local mode has no tuning job (its local client has no
``create_hyper_parameter_tuning_job``). Here the request (``hyperparameter_ranges.py`` reads
and checks it) drives an Optuna study, asked for each trial's values and told each outcome:

- Random: ``RandomSampler``; Grid: every combination once, in order (enqueued trials);
  Bayesian: ``TPESampler`` (a tree-structured Parzen estimator) stands in for SageMaker's
  Bayesian optimisation, which AWS does not publish (the job log says so);
  Hyperband: random values, stopped by ``HyperbandPruner`` on the metric of each epoch.
- ``TrainingJobEarlyStoppingType=Auto``: SageMaker's documented rule (``MedianRule``): after
  each epoch, a trial whose objective is worse than the median of the running averages of
  the earlier trials up to the same epoch is stopped.

An epoch is one value of the objective metric: every line a trial prints that the objective's
MetricDefinitions regex captures is reported to the study as the next step, while the trial
runs. A stopped trial ends as SageMaker's do: TrainingJobStatus Stopped, its last objective
value kept, and the model its script saved (``trials.py``).

The job ends before its last trial where ``MaxRuntimeInSeconds`` or a completion criterion says
so (``completion.py``); a trial that failed on the runner's side runs again under its name, up
to the training definition's ``RetryStrategy.MaximumRetryAttempts``; the job fails only where
no trial succeeded (after five failed ones at most, as SageMaker's does).

Cores: each of the parallel slots gets its own CPUs (``cpu_slots``); a trial's thread sets its
affinity to them before its job starts, so its processes inherit it and the runner's thread
rule (``hosts/launch_settings.py``) divides the slot's cores, not the machine's.
"""

from __future__ import annotations

import json
import secrets
import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.local.hosts.launch_settings import usable_cpus
from pipeline.local.hosts.processes import stop_reason
from pipeline.local.jobs.lifecycle import arn
from pipeline.local.jobs.logs import Sink, now_iso
from pipeline.local.jobs.tuning import completion
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr
from pipeline.local.jobs.tuning.trials import EarlyStop, Trial, TrialJob  # noqa: F401 (EarlyStop: tests')
from pipeline.local.store.private import private_dir, write_private

POLL_SECONDS = 0.2
# SageMaker: a tuning job's name is at most 32 characters; its training jobs are
# <tuning job>-<3-digit trial number>-<8 hex digits>.
TUNING_JOB_NAME_LIMIT = 32
# The median rule needs earlier trials to compare with. SageMaker does not say how many; with
# one, a single lucky trial would stop every later one. Two is our choice (docs/tuning.md).
MEDIAN_RULE_MIN_TRIALS = 2
TRIALS_FILE = "trials.json"  # per trial: the values, epochs run, cores, why it stopped
DESCRIPTION_FILE = "description.json"  # DescribeHyperParameterTuningJob, with the summaries:
SUMMARIES_KEY = "TrainingJobSummaries"  # ListTrainingJobsForHyperParameterTuningJob's


def tuning_job_name(step: str, execution_id: str) -> str:
    suffix = "-" + execution_id.rsplit("-", 1)[-1][:8]
    return step[: TUNING_JOB_NAME_LIMIT - len(suffix)].rstrip("-") + suffix


def cpu_slots(cpus: list[int], parallel: int) -> list[list[int]]:
    """CPUs per parallel trial: contiguous shares (sizes differ by one at most); with more
    trials than cores, slot i shares core i mod cores."""
    if parallel <= len(cpus):
        base, extra = divmod(len(cpus), parallel)
        slots, start = [], 0
        for i in range(parallel):
            size = base + (1 if i < extra else 0)
            slots.append(cpus[start:start + size])
            start += size
        return slots
    return [[cpus[i % len(cpus)]] for i in range(parallel)]


def describe_slots(slots: list[list[int]], cores: int) -> str:
    each = ", ".join(f"slot {i + 1}: cpu {','.join(map(str, s))}" for i, s in enumerate(slots))
    if len(slots) > cores:
        return (f"trials side by side: {len(slots)} on this machine's {cores} core(s), more trials "
                f"than cores, so slots share cores ({each})")
    per = {len(s) for s in slots}
    share = f"{per.pop()} core(s) each" if len(per) == 1 else "cores split as evenly as they go"
    return f"trials side by side: up to {len(slots)}, {share} of this machine's {cores} ({each})"


def strategy_line(request: hr.TuningRequest) -> str:
    """The job log's line on what searches, and what stands in for the service's own."""
    if request.strategy == hr.RANDOM:
        text = "Random: Optuna's RandomSampler (uniform in each range's scale)"
    elif request.strategy == hr.GRID:
        text = f"Grid: every one of the {request.max_jobs} combinations once, in order"
    elif request.strategy == hr.BAYESIAN:
        text = ("Bayesian: Optuna's TPESampler (tree-structured Parzen estimator) stands in for "
                "SageMaker's Bayesian optimisation, whose algorithm AWS does not publish")
    else:
        text = ("Hyperband: random values, trials stopped at Optuna's HyperbandPruner rungs "
                f"(min resource {request.min_resource or 1} epoch(s), max "
                f"{request.max_resource or 'from the first trials'})")
    if request.early_stopping == hr.EARLY_STOPPING_AUTO:
        text += (f"; early stopping Auto: a trial worse than the median of the earlier trials' "
                 f"running averages at the same epoch stops (once {MEDIAN_RULE_MIN_TRIALS} have reported)")
    if request.complete_on_convergence:
        text += "; " + completion.convergence_line()
    autos = [r.name for r in request.ranges if r.scaling == hr.AUTO and r.kind != hr.CATEGORICAL]
    if autos:
        text += f"; ScalingType Auto searched Linear: {', '.join(autos)}"
    return text


# --- The study ---------------------------------------------------------------------------------
def _distributions(request: hr.TuningRequest) -> dict:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    found = {}
    for r in request.ranges:
        if r.kind == hr.CATEGORICAL:
            found[r.name] = CategoricalDistribution(list(r.values))
        elif r.kind == hr.INTEGER:
            found[r.name] = IntDistribution(int(r.low), int(r.high), log=r.effective_scaling == hr.LOG)
        elif r.effective_scaling == hr.REVERSE_LOG:
            # Searched as 1 - x on a log scale: dense near the top of the range, as SageMaker's is.
            found[r.name] = FloatDistribution(1.0 - r.high, 1.0 - r.low, log=True)
        else:
            found[r.name] = FloatDistribution(r.low, r.high, log=r.effective_scaling == hr.LOG)
    return found


def trial_values(request: hr.TuningRequest, params: Mapping) -> dict[str, str]:
    """The study's values as the trial's hyperparameter strings."""
    values = {}
    for r in request.ranges:
        value = params[r.name]
        if r.kind == hr.CONTINUOUS and r.effective_scaling == hr.REVERSE_LOG:
            value = 1.0 - value
        values[r.name] = r.format(value)
    return values


def median_rule(maximize: bool, min_trials: int = MEDIAN_RULE_MIN_TRIALS):
    """SageMaker's early stopping (``TrainingJobEarlyStoppingType=Auto``) as an Optuna pruner."""
    import optuna

    class MedianRule(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            return median_rule_verdict(trial, study.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)),
                maximize, min_trials) is not None

    return MedianRule()


def median_rule_verdict(trial, earlier, maximize: bool, min_trials: int = MEDIAN_RULE_MIN_TRIALS) -> str | None:
    """Why ``trial`` stops now (None: it goes on): its value at its last step is worse than the
    median of the running averages of ``earlier`` trials (those that reached that step)."""
    step = trial.last_step
    if step is None:
        return None
    value = trial.intermediate_values[step]
    averages = []
    for other in earlier:
        if other.number == trial.number or step not in other.intermediate_values:
            continue
        upto = [v for s, v in sorted(other.intermediate_values.items()) if s <= step]
        averages.append(sum(upto) / len(upto))
    if len(averages) < min_trials:
        return None
    median = statistics.median(averages)
    worse = value < median if maximize else value > median
    if not worse:
        return None
    return (f"at epoch {step} its {value:g} is {'below' if maximize else 'above'} the median {median:g} of "
            f"{len(averages)} earlier trials' running averages")


def make_study(request: hr.TuningRequest):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    direction = "maximize" if request.maximize else "minimize"
    seed = request.seed
    if request.strategy == hr.BAYESIAN:
        # Random for the first few trials (as SageMaker's Bayesian starts), then the model;
        # constant_liar keeps parallel trials from being asked for the same point.
        startup = max(2, min(10, request.max_jobs // 3))
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, constant_liar=True)
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)
    if request.strategy == hr.HYPERBAND:
        pruner = optuna.pruners.HyperbandPruner(min_resource=request.min_resource or 1,
                                                max_resource=request.max_resource or "auto")
    elif request.early_stopping == hr.EARLY_STOPPING_AUTO:
        pruner = median_rule(request.maximize)
    else:
        pruner = optuna.pruners.NopPruner()
    study = optuna.create_study(direction=direction, sampler=sampler, pruner=pruner)
    if request.strategy == hr.GRID:
        for point in hr.grid_points(request.ranges):
            study.enqueue_trial(point)
    return study


@dataclass
class TuningResult:
    status: str  # Completed | Failed
    description: dict  # DescribeHyperParameterTuningJob + TrainingJobSummaries
    trials: list[Trial]
    failure_reason: str | None = None
    ended_early: str | None = None  # the completion criterion that ended it before its last trial


class HyperparameterTuningJob:
    def __init__(self, request: Mapping, name: str, storage, job_root: Path, *, region: str = "us-east-1",
                 account: str = "000000000000", stream=None, echo: bool = True,
                 environments: Path | None = None, cpus: list[int] | None = None,
                 log_dir: Path | None = None):
        self.raw = dict(request)
        self.request = hr.parse(request)  # refused here, before any trial
        self.name = name
        self.storage = storage
        self.job_root = Path(job_root)  # each trial's job folder goes under it
        self.region = region
        self.account = account
        self.environments = environments
        self.cpus = list(cpus) if cpus is not None else usable_cpus()
        # Private, as a job's folder: its description holds the request.
        self.log_dir = private_dir(Path(log_dir) if log_dir else self.job_root / name)
        self.sink = Sink(self.log_dir / "tuning-job.log", echo=echo, stream=stream)
        self.trials: list[Trial] = []
        self.progress = completion.Progress(self.request)
        self.ended: str | None = None  # why the job ended before its last trial
        self.failed_early = False  # its first trials all failed (SageMaker's five attempts)
        self.interrupted: TuningResult | None = None  # Ctrl-C: the job Stopped, with the trials that ended

    def say(self, text: str) -> None:
        self.sink.line(f"[{self.name}] {text}")

    def _trial_name(self, number: int) -> str:
        return f"{self.name}-{number:03d}-{secrets.token_hex(4)}"

    def _start(self, study, distributions, cpus: list[int]) -> Trial:
        number = len(self.trials) + 1
        study_trial = study.ask(distributions)
        values = trial_values(self.request, study_trial.params)
        name = self._trial_name(number)
        stop = threading.Event()
        job = TrialJob(self.request.trial_request(values), name, self.storage, self.job_root / name,
                       region=self.region, echo=False, environments=self.environments, stop_event=stop)
        trial = Trial(number, name, values, study_trial, cpus, job, stop)
        self.trials.append(trial)
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        self.say(f"trial {number}/{self.request.max_jobs} {name}: {shown} (cpu {','.join(map(str, cpus))}; "
                 f"log {job.log_path})")
        trial.start()
        return trial

    def _retried(self, trial: Trial) -> bool:
        """SageMaker: a training job that failed with an InternalServerError runs again under
        its name, up to RetryStrategy.MaximumRetryAttempts; the script's own failures do not."""
        if trial.stop_reason is not None or not trial.internal_failure or trial.attempts > self.request.max_retries:
            return False
        reason = trial.error or trial.result.failure_reason
        trial.attempts += 1
        self.say(f"trial {trial.number} failed ({reason}); retry {trial.attempts - 1} of "
                 f"{self.request.max_retries} (RetryStrategy.MaximumRetryAttempts)")
        trial.job = TrialJob(trial.job.request, trial.name, self.storage,
                             self.job_root / f"{trial.name}-attempt-{trial.attempts}", region=self.region,
                             echo=False, environments=self.environments, stop_event=trial.stop)
        trial.result, trial.error, trial.reported, trial.last_value = None, None, 0, None
        trial.start()
        return True

    def _stop_running(self, running: Mapping[int, Trial], reason: str) -> None:
        """The tuning job ends: its running trials stop, each keeping its model."""
        for trial in running.values():
            if not trial.stop.is_set():
                trial.stop_reason = f"stopped by {self.name}: {reason}"
                trial.job.stop_reason = trial.stop_reason
                trial.stop.set()

    def _feed(self, trial: Trial) -> None:
        """New objective values of a running trial go to the study; the pruner may stop it."""
        with trial.job.metrics.lock:
            points = list(trial.job.metrics.series.get(self.request.objective_metric, []))
        for point in points[trial.reported:]:
            trial.reported += 1
            trial.last_value = point["value"]
            trial.study_trial.report(point["value"], trial.reported)
            if trial.stop.is_set() or trial.thread is None or not trial.thread.is_alive():
                continue
            if trial.study_trial.should_prune():
                trial.stop_reason = self._why_stopped(trial)
                trial.verdict_epoch = trial.reported
                self.say(f"trial {trial.number} stopping early: {trial.stop_reason}")
                trial.job.stop_reason = f"stopped early by {self.name}: {trial.stop_reason}"
                trial.stop.set()

    def _why_stopped(self, trial: Trial) -> str:
        if self.request.strategy == hr.HYPERBAND:
            return f"Hyperband stopped it at epoch {trial.reported} ({self.request.objective_metric} {trial.last_value:g})"
        import optuna

        earlier = trial.study_trial.study.get_trials(
            deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
        frozen = next(t for t in trial.study_trial.study.get_trials(deepcopy=False)
                      if t.number == trial.study_trial.number)
        why = median_rule_verdict(frozen, earlier, self.request.maximize)
        return f"early stopping (Auto): {why or 'the median rule'}"

    def _finish(self, study, trial: Trial) -> None:
        import optuna

        self._feed(trial)  # the lines read after its last poll
        if trial.stop_reason is not None and trial.status == "Completed":
            self.say(f"trial {trial.number} had finished its training when the stop came: it stays Completed")
            trial.stop_reason = None
        if trial.result is not None:
            final = {m["MetricName"]: m["Value"] for m in trial.result.description.get("FinalMetricDataList", [])}
            if self.request.objective_metric in final:
                trial.last_value = final[self.request.objective_metric]
        if trial.stop_reason is not None and trial.result is not None:
            if trial.reported:
                # The reason was written when the stop was decided; its epoch is the verdict's.
                # The epoch the trial stopped at goes with it, wherever the reason is shown
                # (the summaries, describe-training-job), so "at epoch 1" never stands alone.
                trial.stop_reason += f" (it stopped after epoch {trial.reported})"
            trial.result.description["TrainingJobStatus"] = "Stopped"
            trial.result.description["FailureReason"] = trial.stop_reason
            write_private(trial.job.job_dir / "description.json",
                          json.dumps(trial.result.description, indent=2, default=str))
            study.tell(trial.study_trial, state=optuna.trial.TrialState.PRUNED)
            # Its processes stop at the next poll after the verdict, and short epochs may run
            # on meanwhile: the line says both, so the two epochs shown never disagree unsaid.
            outcome = f"Stopped at epoch {trial.reported}" + (
                f" (stopping was decided at epoch {trial.verdict_epoch}; it trained on until its processes "
                f"stopped)" if trial.verdict_epoch is not None and trial.verdict_epoch != trial.reported else "") + (
                "" if trial.kept_model else "; no model kept: its script had saved none when it stopped")
        elif trial.status == "Completed" and trial.last_value is not None:
            study.tell(trial.study_trial, trial.last_value)
            outcome = f"Completed in {trial.result.duration:.1f}s"
        else:
            study.tell(trial.study_trial, state=optuna.trial.TrialState.FAIL)
            reason = trial.error or (trial.result.failure_reason if trial.result else None)
            if trial.status == "Completed":
                reason = (f"no line of its log matched the metric definition of "
                          f"{self.request.objective_metric!r}")
                trial.error = reason
            outcome = f"{trial.status if trial.status != 'Completed' else 'Failed'}: {reason}"
        value = "" if trial.last_value is None else f", {self.request.objective_metric}={trial.last_value:g}"
        self.say(f"trial {trial.number} {outcome}{value}")
        scored = trial.status in ("Completed", "Stopped") and trial.error is None
        self.progress.add(trial.last_value if scored else None, time.time())

    def run(self) -> TuningResult:
        start = time.time()
        self.say(strategy_line(self.request))
        self.say("ranges: " + "; ".join(r.describe() for r in self.request.ranges))
        parallel = min(self.request.max_parallel, self.request.max_jobs)
        slots = cpu_slots(self.cpus, parallel)
        self.say(describe_slots(slots, len(self.cpus)))
        study = make_study(self.request)
        distributions = _distributions(self.request)
        free = list(range(parallel))
        running: dict[int, Trial] = {}
        try:
            while (len(self.trials) < self.request.max_jobs and self.ended is None) or running:
                while free and len(self.trials) < self.request.max_jobs and self.ended is None:
                    slot = free.pop(0)
                    running[slot] = self._start(study, distributions, slots[slot])
                time.sleep(POLL_SECONDS)
                for slot, trial in list(running.items()):
                    self._feed(trial)
                    if not trial.thread.is_alive():
                        trial.thread.join()
                        if self._retried(trial):
                            continue
                        self._finish(study, trial)
                        del running[slot]
                        free.append(slot)
                        free.sort()
                self._judge(time.time() - start, running)
        except KeyboardInterrupt:
            # Ctrl-C / SIGTERM reach the main thread: every running trial is stopped and waited for.
            for trial in running.values():
                trial.job.stop_reason = stop_reason()
                trial.stop.set()
            for trial in running.values():
                trial.thread.join()
            # SageMaker: a stopped tuning job is Stopped, and lists its trials, the stopped ones too.
            for trial in running.values():
                trial.stop_reason = trial.stop_reason or f"stopped with {self.name}: {stop_reason()}"
                self._finish(study, trial)
            self.interrupted = self._result(start, time.time(), status="Stopped")
            self.sink.close()
            raise
        result = self._result(start, time.time())
        self.sink.close()
        return result

    def _judge(self, elapsed: float, running: Mapping[int, Trial]) -> None:
        """Whether the job ends now: a completion criterion met, or its first trials all failed."""
        if self.ended is not None:
            return
        if self.progress.first_attempts_failed():
            self.ended, self.failed_early = completion.FIRST_ATTEMPTS_REASON, True
        else:
            self.ended = self.progress.reason(elapsed)
        if self.ended is not None:
            self.say(f"ends: {self.ended}" + (f"; stopping {len(running)} running trial(s)" if running else ""))
            self._stop_running(running, self.ended)

    def _result(self, start: float, end: float, status: str | None = None) -> TuningResult:
        """``status``: Stopped for a job stopped from outside (Ctrl-C); else from its trials."""
        req = self.request
        summaries = [t.summary(self.name, req, self.region, self.account) for t in self.trials]
        scored = [s for s in summaries if "FinalHyperParameterTuningJobObjectiveMetric" in s]
        value = lambda s: s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]  # noqa: E731
        # Best first (SageMaker: ListTrainingJobsForHyperParameterTuningJob sorted by the final
        # objective; get_top_model_s3_uri(0) reads the first). Completed before Stopped at equal values.
        scored.sort(key=lambda s: (-value(s) if req.maximize else value(s), s["TrainingJobStatus"] != "Completed"))
        ordered = scored + [s for s in summaries if s not in scored]
        best = next((s for s in scored if s["TrainingJobStatus"] == "Completed"), None)
        stopped = sum(1 for t in self.trials if t.stop_reason)
        completed = len(self.trials) - stopped - sum(1 for t in self.trials if t.status == "Failed" or t.error)
        # SageMaker: RetryableError counts the failures on its side (retried, if RetryStrategy
        # allowed, and failed again); NonRetryableError the script's and the request's.
        retryable = sum(1 for t in self.trials if not t.stop_reason and t.internal_failure)
        doc = {
            "HyperParameterTuningJobName": self.name,
            "HyperParameterTuningJobArn": arn(self.region, self.account, "hyper-parameter-tuning-job", self.name.lower()),
            "HyperParameterTuningJobConfig": self.raw.get("HyperParameterTuningJobConfig"),
            "TrainingJobDefinition": self.raw.get("TrainingJobDefinition"),
            "HyperParameterTuningJobStatus": status or ("Completed" if best and not self.failed_early else "Failed"),
            "CreationTime": now_iso(start),
            "HyperParameterTuningEndTime": now_iso(end),
            "LastModifiedTime": now_iso(end),
            "TrainingJobStatusCounters": {
                "Completed": completed, "InProgress": 0, "RetryableError": retryable,
                "NonRetryableError": len(self.trials) - completed - stopped - retryable, "Stopped": stopped},
            "ObjectiveStatusCounters": {"Succeeded": len(scored), "Pending": 0,
                                        "Failed": len(summaries) - len(scored)},
            "ConsumedResources": {"RuntimeInSeconds": int(round(end - start))},
            "TuningJobCompletionDetails": self.progress.details(),
            SUMMARIES_KEY: ordered,
        }
        failure = None
        if best and not self.failed_early:
            doc["BestTrainingJob"] = best
        else:
            first = next((s.get("FailureReason") for s in summaries if s.get("FailureReason")), None)
            unmatched = sum(1 for t in self.trials if t.status == "Completed" and t.last_value is None)
            if first is None and unmatched:  # they ran to the end, and the regex caught nothing
                regex = next((d.get("Regex") for d in req.metric_definitions if d.get("Name") == req.objective_metric), None)
                first = (f"none: {unmatched} completed, but no line of their logs matched the objective's "
                         f"regex {regex!r}; print {req.objective_metric} as the regex expects, or fix the "
                         f"regex (metric_definitions)")
            failure = (completion.FIRST_ATTEMPTS_REASON if self.failed_early else
                       f"no trial of {self.name} completed with the objective {req.objective_metric!r} "
                       f"({len(self.trials)} ran)") + f"; the first trial's failure: {first or 'no reason given'}"
            doc["FailureReason"] = failure
        write_private(self.log_dir / DESCRIPTION_FILE, json.dumps(doc, indent=2, default=str))
        # Private, as each trial's description.json: the requests hold Environment and hyperparameters.
        write_private(self.log_dir / TRIALS_FILE,
                      json.dumps([self._trial_record(t) for t in self.trials], indent=2, default=str))
        if best:
            self.say(f"best: {best['TrainingJobName']} {req.objective_metric}="
                     f"{value(best):g} with " + ", ".join(f"{k}={v}" for k, v in best["TunedHyperParameters"].items()))
        return TuningResult(doc["HyperParameterTuningJobStatus"], doc, list(self.trials), failure, self.ended)

    def _trial_record(self, trial: Trial) -> dict:
        return {
            "number": trial.number, "name": trial.name, "values": trial.values, "status": trial.status,
            "objective": trial.last_value, "epochs": trial.reported, "stopped_early": trial.stop_reason is not None,
            "stop_reason": trial.stop_reason, "cpus": trial.cpus, "attempts": trial.attempts,
            "seconds": trial.result.duration if trial.result else None,
            "job_dir": str(trial.job.job_dir),
            "description": trial.result.description if trial.result else None,
        }


def trial_descriptions(result: TuningResult) -> list[dict]:
    """Each trial's DescribeTrainingJob document (for the cost of every trial)."""
    return [t.result.description for t in result.trials if t.result is not None]


