"""The runner's Tuning step (SageMaker's ``TuningStep``): a ``jobs/tuning/hyperparameter_tuning.py``
job, whose trials are training jobs of this run.

Its properties are what SageMaker gives a later step: the DescribeHyperParameterTuningJob
response (``BestTrainingJob.TrainingJobName``, its ``FinalHyperParameterTuningJobObjectiveMetric``,
...) with ``TrainingJobSummaries`` (ListTrainingJobsForHyperParameterTuningJob, best first), so
``TuningStep.get_top_model_s3_uri(top_k, bucket, prefix)`` (a Std:Join over
``TrainingJobSummaries[top_k].TrainingJobName``) names the top trials' models.

The request is checked before the run starts where it can be evaluated then (``check``),
else when the step starts: either way before any trial.
"""

from __future__ import annotations

from pipeline.costs import accounting
from pipeline.errors import UserError
from pipeline.local.dag import interpreter
from pipeline.local.dag.interpreter import STEP_TUNING, ExpressionError  # noqa: F401 (the runner's)
from pipeline.local.execution import FAILED, SUCCEEDED, StepRecord
from pipeline.local.jobs.lifecycle import ENVIRONMENTS, account_of
from pipeline.local.jobs.tuning import data_fit, hyperparameter_ranges
from pipeline.local.jobs.tuning.hyperparameter_tuning import (
    HyperparameterTuningJob,
    tuning_job_name,
)


def check(nodes, ctx) -> None:
    """Each Tuning step's request, where it reads nothing of earlier steps: bad ranges,
    objectives and limits are refused (one line naming the step) before the first job."""
    for node in nodes:
        if node.type != STEP_TUNING:
            continue
        try:
            request = interpreter.evaluate(node.body.get("Arguments", {}), ctx)
        except interpreter.Unresolved:
            # Channels that read earlier steps: check what does not.
            arguments = node.body.get("Arguments", {})
            try:
                request = {
                    "HyperParameterTuningJobConfig": interpreter.evaluate(
                        arguments.get("HyperParameterTuningJobConfig"), ctx),
                    "TrainingJobDefinition": {
                        k: interpreter.evaluate(v, ctx) for k, v in (arguments.get("TrainingJobDefinition") or {}).items()
                        if k != "InputDataConfig"},
                }
            except ExpressionError:
                continue
        except ExpressionError:
            continue
        try:
            hyperparameter_ranges.parse(request)
        except UserError as error:
            raise hyperparameter_ranges.TuningRequestError(f"Tuning step {node.name}: {error}") from None


def run_tuning(runner, node, record: StepRecord) -> bool:
    request = interpreter.evaluate(node.body.get("Arguments", {}), runner.ctx)
    # SageMaker: a Tuning step's CacheConfig reuses an earlier execution's tuning job whose
    # request was the same (its trials' models still there: caching.output_uris).
    keyed = runner._cache_key(node)
    entry = runner._cached(node, keyed[0]) if keyed is not None else None
    if entry is not None:
        record.status, record.properties = SUCCEEDED, entry.properties
        record.job_name = entry.properties.get("HyperParameterTuningJobName")
        record.cache_hit = {"execution_id": entry.execution_id, "key": keyed[0][:16]}
        record.detail = f"cache hit: reused {record.job_name} from execution {entry.execution_id}"
        objective = (entry.properties.get("BestTrainingJob") or {}).get("FinalHyperParameterTuningJobObjectiveMetric")
        record.metrics = {objective["MetricName"]: objective["Value"]} if objective else {}
        return True
    name = tuning_job_name(node.name, runner.execution_id)
    record.job_name = name
    record.job_dir = str(runner.run_dir / "jobs" / name)
    runner.record.save()
    meter = accounting.LocalMeter()
    try:
        # No trial may fail for a batch size its data cannot hold (data_fit.py).
        request, clipped = data_fit.clip_batch_size(request, runner.storage)
        job = HyperparameterTuningJob(
            request, name, runner.storage, runner.run_dir / "jobs", region=runner.options.region,
            account=account_of(request.get("TrainingJobDefinition") or {}), stream=runner.options.stream,
            echo=runner.options.echo, environments=runner.workdir / ENVIRONMENTS)
    except UserError as error:
        record.status, record.failure_reason = FAILED, f"ClientError: {error}"
        return False
    if clipped:
        job.say(clipped)
    try:
        result = job.run()
    except KeyboardInterrupt:
        record.cost = tuning_cost(runner, job, meter)
        if job.interrupted is not None:  # Stopped, with the trials that ended: `trainpipe status` lists them
            record.properties = job.interrupted.description
        raise
    record.cost = tuning_cost(runner, job, meter)
    record.properties = result.description
    best = result.description.get("BestTrainingJob")
    if best:
        objective = best["FinalHyperParameterTuningJobObjectiveMetric"]
        record.metrics = {objective["MetricName"]: objective["Value"]}
        counters = result.description["TrainingJobStatusCounters"]
        failed = counters["RetryableError"] + counters["NonRetryableError"]
        record.detail = (f"best of {len(result.trials)} trials" + (f" ({failed} failed)" if failed else "")
                         + f": {best['TrainingJobName']} "
                         f"{objective['MetricName']}={objective['Value']:g} "
                         f"({', '.join(f'{k}={v}' for k, v in best['TunedHyperParameters'].items())})"
                         + (f"; {counters['Stopped']} stopped early" if counters["Stopped"] else "")
                         + (f"; ended before its last trial: {result.ended_early}" if result.ended_early else ""))
        record.status = SUCCEEDED
        if keyed is not None:
            runner.cache.store(keyed[0], node.name, runner.execution_id, result.description, keyed[1])
        return True
    record.status, record.failure_reason = FAILED, result.failure_reason
    return False


def tuning_cost(runner, job: HyperparameterTuningJob, meter: accounting.LocalMeter) -> dict:
    """Every trial's instance-time counts (they all held instances on SageMaker); the machine's
    energy is the whole step's, measured once (trials ran side by side)."""
    wall, cpu, joules = meter.stop()
    trials = [t for t in job.trials if t.result is not None]
    seconds = sum(t.result.duration for t in trials)
    definition = job.request.trial_request({})
    described = {"TrainingJobName": job.name, "ResourceConfig": definition.get("ResourceConfig") or {}}
    try:
        doc = accounting.local_job_cost(described, "Training", runner.options.region, runner.prices,
                                        seconds, cpu, joules)
    except UserError as error:
        return {"job": job.name, "kind": "Training", "notes": [str(error)]}
    doc["notes"] = list(doc.get("notes", [])) + [
        f"{len(trials)} trial(s): {seconds:.1f} s of training-job time in {wall:.1f} s of wall time"]
    doc["trials"] = [{"job": t.name, "seconds": t.result.duration, "status": t.status} for t in trials]
    return doc


def trials_table(properties: dict) -> tuple[list[str], list[list[str]]] | None:
    """A Tuning step's trials as rows (``trainpipe status``): in the order they started, each
    tuned value, the objective and whether the tuning job stopped it early; the best marked."""
    summaries = properties.get("TrainingJobSummaries")
    if not summaries:
        return None
    best = (properties.get("BestTrainingJob") or {}).get("TrainingJobName")
    names = list(dict.fromkeys(k for s in summaries for k in s.get("TunedHyperParameters", {})))
    metric = next((s["FinalHyperParameterTuningJobObjectiveMetric"]["MetricName"] for s in summaries
                   if "FinalHyperParameterTuningJobObjectiveMetric" in s), "OBJECTIVE")
    rows = []
    for summary in sorted(summaries, key=lambda s: s["TrainingJobName"]):
        objective = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        rows.append([
            summary["TrainingJobName"] + (" (best)" if summary["TrainingJobName"] == best else ""),
            *(summary.get("TunedHyperParameters", {}).get(n, "") for n in names),
            f"{objective['Value']:g}" if objective else "-",
            "yes" if summary.get("TrainingJobStatus") == "Stopped" else "no",
            summary.get("TrainingJobStatus", ""),
        ])
    return ["TRIAL", *names, metric, "STOPPED EARLY", "STATUS"], rows
