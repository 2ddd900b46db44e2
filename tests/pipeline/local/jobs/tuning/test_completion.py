"""When a tuning job ends before its last trial (``completion.py``): SageMaker's completion
criteria, its run-time limit and its five failed first attempts, judged trial by trial (unit
tests, milliseconds); the bounds of each setting are refused in one line."""

from __future__ import annotations

import pytest

from pipeline.local.jobs.tuning import completion
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr

from .test_hyperparameter_ranges import changed


def _progress(criteria: dict | None = None, maximize: bool = True, **limits) -> completion.Progress:
    request = hr.parse(changed(
        HyperParameterTuningJobConfig__TuningJobCompletionCriteria=criteria or {},
        HyperParameterTuningJobConfig__ResourceLimits={"MaxNumberOfTrainingJobs": 20, "MaxParallelTrainingJobs": 2,
                                                       **limits},
        HyperParameterTuningJobConfig__HyperParameterTuningJobObjective={
            "Type": "Maximize" if maximize else "Minimize", "MetricName": "validation:accuracy"}))
    return completion.Progress(request)


def test_the_target_ends_the_job_once_a_trial_reaches_it_either_way():
    progress = _progress({"TargetObjectiveMetricValue": 0.9})
    progress.add(0.85, 1.0)
    assert progress.reason(10) is None
    progress.add(0.9, 2.0)
    assert progress.reason(10) == "TargetObjectiveMetricValue 0.9 reached (validation:accuracy=0.9)"
    minimising = _progress({"TargetObjectiveMetricValue": 0.2}, maximize=False)
    minimising.add(0.3, 1.0)
    assert minimising.reason(10) is None
    minimising.add(0.15, 2.0)
    assert minimising.reason(10).startswith("TargetObjectiveMetricValue 0.2 reached")


def test_trials_not_improving_the_best_by_one_percent_are_counted_in_a_row():
    progress = _progress({"BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 3}})
    for value in (0.80, 0.85, 0.855, 0.70):  # 0.855 betters 0.85 by 0.6%: not improving
        progress.add(value, 1.0)
    assert progress.not_improving == 2 and progress.reason(10) is None
    progress.add(None, 1.0)  # a failed trial has no objective: it does not count
    assert progress.details() == {"NumberOfTrainingJobsObjectiveNotImproving": 2}
    progress.add(0.86, 1.0)
    assert progress.reason(10).startswith("BestObjectiveNotImproving: 3 trials in a row did not improve the best "
                                          "validation:accuracy=0.86 by 1%")
    progress.add(0.95, 1.0)  # a real improvement starts the count again
    assert progress.not_improving == 0 and progress.best == 0.95


def test_convergence_is_the_later_half_finding_nothing_better_and_is_dated():
    values = [0.5, 0.8, 0.6, 0.7, 0.79, 0.805]  # later half's best 0.805 vs 0.8: 0.6%
    assert not completion.converged(values[:5], maximize=True)  # too few to judge
    assert completion.converged(values, maximize=True)
    assert not completion.converged([0.5, 0.6, 0.55, 0.7, 0.65, 0.9], maximize=True)
    assert completion.converged([0.3, 0.2, 0.25, 0.21, 0.3, 0.199], maximize=False)
    off = _progress()
    enabled = _progress({"ConvergenceDetected": {"CompleteOnConvergence": "Enabled"}})
    for i, value in enumerate(values):
        off.add(value, 100.0 + i)
        enabled.add(value, 100.0 + i)
    assert off.reason(10) is None and "ConvergenceDetectedTime" in off.details()  # seen, not acted on
    assert enabled.reason(10).startswith("ConvergenceDetected: the later half of 6 scored trials")
    assert enabled.details()["ConvergenceDetectedTime"] == completion.now_iso(105.0)


def test_the_run_time_limit_and_the_five_failed_first_attempts():
    progress = _progress(MaxRuntimeInSeconds=120)
    assert progress.reason(119.5) is None
    assert progress.reason(120.2) == "MaxRuntimeInSeconds=120 reached after 120s"
    for _ in range(completion.FIRST_ATTEMPTS - 1):
        progress.add(None, 1.0)
    assert not progress.first_attempts_failed()
    progress.add(None, 1.0)
    assert progress.first_attempts_failed()
    succeeded_first = _progress()
    succeeded_first.add(0.5, 1.0)
    for _ in range(10):
        succeeded_first.add(None, 1.0)
    assert not succeeded_first.first_attempts_failed()  # after one success, failures never fail the job


@pytest.mark.parametrize(("paths", "expected"), [
    ({"HyperParameterTuningJobConfig__ResourceLimits__MaxRuntimeInSeconds": 60},
     "ResourceLimits.MaxRuntimeInSeconds=60 must be between 120 and 15768000 (SageMaker's limits)"),
    ({"HyperParameterTuningJobConfig__TuningJobCompletionCriteria": {
        "BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 2}}},
     "BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving=2 must be at least 3 (SageMaker's limits)"),
    ({"HyperParameterTuningJobConfig__TuningJobCompletionCriteria": {
        "ConvergenceDetected": {"CompleteOnConvergence": "Yes"}}},
     "ConvergenceDetected.CompleteOnConvergence 'Yes' must be Enabled or Disabled"),
    ({"HyperParameterTuningJobConfig__TuningJobCompletionCriteria": {"TargetObjectiveMetricValue": "high"}},
     "TuningJobCompletionCriteria.TargetObjectiveMetricValue 'high' is not a number"),
    ({"TrainingJobDefinition__RetryStrategy": {"MaximumRetryAttempts": 31}},
     "RetryStrategy.MaximumRetryAttempts=31 must be between 1 and 30 (SageMaker's limits)"),
])
def test_each_bad_setting_is_one_line(paths, expected):
    with pytest.raises(hr.TuningRequestError) as raised:
        hr.parse(changed(**paths))
    assert str(raised.value) == expected


def test_the_settings_are_read():
    request = hr.parse(changed(
        HyperParameterTuningJobConfig__ResourceLimits__MaxRuntimeInSeconds=3600,
        HyperParameterTuningJobConfig__TuningJobCompletionCriteria={
            "TargetObjectiveMetricValue": 0.95, "BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 5},
            "ConvergenceDetected": {"CompleteOnConvergence": "Enabled"}},
        TrainingJobDefinition__RetryStrategy={"MaximumRetryAttempts": 2}))
    assert (request.max_runtime, request.target_value, request.max_not_improving, request.complete_on_convergence,
            request.max_retries) == (3600, 0.95, 5, True, 2)
    assert "RetryStrategy" not in request.trial_request({})  # the tuning job retries, not the trial
