"""When a tuning job ends before its last trial, as SageMaker's automatic model tuning ends it
(https://docs.aws.amazon.com/sagemaker/latest/dg/automatic-model-tuning-progress.html):

- ``ResourceLimits.MaxRuntimeInSeconds``: the job's wall time is up;
- ``TuningJobCompletionCriteria.TargetObjectiveMetricValue``: a trial's final objective
  reached it;
- ``BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving``: that many trials in a row
  improved on the best so far by less than 1%;
- ``ConvergenceDetected.CompleteOnConvergence=Enabled``: AWS's convergence test is unpublished;
  the stand-in here (``converged``) is said in the job log and in docs/tuning.md.

Any criterion met ends the job Completed: no new trial starts, the running ones are stopped
(each keeps its model, as a stopped training job does). ``TuningJobCompletionDetails`` counts
the trials not improving and when convergence was seen, as DescribeHyperParameterTuningJob
shows them. Pure logic: the tuning job (``hyperparameter_tuning.py``) feeds it each trial's end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.local.jobs.logs import now_iso
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr

# SageMaker: a trial that improves the best objective by less than this share is "not
# improving" (BestObjectiveNotImproving; HyperParameterTuningJobCompletionDetails: "1% or less").
IMPROVEMENT = 0.01
# SageMaker fails a tuning job whose first trials all fail ("No training job succeeded after 5
# attempts. Please take a look at the training job failures to get more details.", the
# FailureReason quoted in aws/amazon-sagemaker-examples issues #2436 and #2437); once one
# trial has succeeded, failed trials no longer fail the job.
FIRST_ATTEMPTS = 5
FIRST_ATTEMPTS_REASON = (f"No training job succeeded after {FIRST_ATTEMPTS} attempts. Please take a "
                         f"look at the training job failures to get more details.")
# The convergence stand-in looks at no fewer scored trials than this: twice SageMaker's
# smallest MaxNumberOfTrainingJobsNotImproving, so that each half holds at least that many.
CONVERGENCE_MIN_TRIALS = 2 * hr.MIN_NOT_IMPROVING


def improvement(new: float, best: float, maximize: bool) -> float:
    """How much ``new`` betters ``best``, as a share of ``best`` (absolute where best is 0)."""
    gain = new - best if maximize else best - new
    return gain / abs(best) if best else gain


def converged(values: list[float], maximize: bool) -> bool:
    """The stand-in for AWS's convergence test: the later half of the scored trials (in the
    order they ended) found nothing 1% better than the best of the earlier half."""
    if len(values) < CONVERGENCE_MIN_TRIALS:
        return False
    half = len(values) // 2
    pick = max if maximize else min
    return improvement(pick(values[half:]), pick(values[:half]), maximize) < IMPROVEMENT


def convergence_line() -> str:
    return (f"convergence (CompleteOnConvergence) stands in for AWS's unpublished test: after at least "
            f"{CONVERGENCE_MIN_TRIALS} scored trials, the later half found nothing {IMPROVEMENT:.0%} better "
            f"than the earlier half's best")


@dataclass
class Progress:
    """The tuning job's standing against its completion criteria, trial by trial."""

    request: hr.TuningRequest
    best: float | None = None
    values: list[float] = field(default_factory=list)  # scored trials' objectives, in end order
    not_improving: int = 0  # trials in a row since the best last improved by IMPROVEMENT
    converged_at: float | None = None
    failed_first: int = 0  # trials that failed before any was scored

    def add(self, value: float | None, now: float) -> None:
        """A trial ended: its final objective, None where it has none (it failed)."""
        if value is None:
            if not self.values:
                self.failed_first += 1
            return
        maximize = self.request.maximize
        if self.best is not None:
            improved = improvement(value, self.best, maximize) >= IMPROVEMENT
            self.not_improving = 0 if improved else self.not_improving + 1
        if self.best is None or self.request.better(value, self.best):
            self.best = value
        self.values.append(value)
        if self.converged_at is None and converged(self.values, maximize):
            self.converged_at = now

    def first_attempts_failed(self) -> bool:
        return not self.values and self.failed_first >= FIRST_ATTEMPTS

    def reason(self, elapsed: float) -> str | None:
        """The criterion met, in words for the job log, or None: the job goes on."""
        req = self.request
        if req.target_value is not None and self.best is not None and not req.better(req.target_value, self.best):
            return (f"TargetObjectiveMetricValue {req.target_value:g} reached "
                    f"({req.objective_metric}={self.best:g})")
        if req.max_not_improving is not None and self.not_improving >= req.max_not_improving:
            return (f"BestObjectiveNotImproving: {self.not_improving} trials in a row did not improve the best "
                    f"{req.objective_metric}={self.best:g} by {IMPROVEMENT:.0%} (MaxNumberOfTrainingJobsNotImproving="
                    f"{req.max_not_improving})")
        if req.complete_on_convergence and self.converged_at is not None:
            return (f"ConvergenceDetected: the later half of {len(self.values)} scored trials found nothing "
                    f"{IMPROVEMENT:.0%} better than the best of the earlier half")
        if req.max_runtime is not None and elapsed >= req.max_runtime:
            return f"MaxRuntimeInSeconds={req.max_runtime} reached after {elapsed:.0f}s"
        return None

    def details(self) -> dict:
        """SageMaker: DescribeHyperParameterTuningJob's TuningJobCompletionDetails."""
        doc = {"NumberOfTrainingJobsObjectiveNotImproving": self.not_improving}
        if self.converged_at is not None:
            doc["ConvergenceDetectedTime"] = now_iso(self.converged_at)
        return doc
