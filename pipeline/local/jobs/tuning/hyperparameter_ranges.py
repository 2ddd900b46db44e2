"""A CreateHyperParameterTuningJob request, read and checked the way SageMaker checks it,
before any trial starts: the ranges and their scaling, the objective and the metric
definitions that capture it, the resource limits, the strategy. Pure: nothing runs here
(``hyperparameter_tuning.py`` runs the trials).

What the request says (the SDK's ``HyperparameterTuner`` writes it; ``TuningStep`` puts it in
a definition as the step's ``Arguments``):

- ``HyperParameterTuningJobConfig``: ``Strategy`` (Bayesian | Random | Hyperband | Grid),
  ``ResourceLimits`` (``MaxNumberOfTrainingJobs``, ``MaxParallelTrainingJobs``),
  ``HyperParameterTuningJobObjective`` (``Type`` Maximize | Minimize, ``MetricName``),
  ``ParameterRanges`` (Continuous / Integer / Categorical, each with a ``ScalingType``),
  ``TrainingJobEarlyStoppingType`` (Off | Auto), ``RandomSeed``, ``StrategyConfig``;
- ``TrainingJobDefinition``: a CreateTrainingJob request without a name, with
  ``StaticHyperParameters`` and ``HyperParameterTuningResourceConfig`` (or ``ResourceConfig``).

SageMaker's rules kept here (its developer guide, "Define Hyperparameter Ranges", "How
Hyperparameter Tuning Works", and the API reference):

- Logarithmic scaling only for ranges above 0; ReverseLogarithmic only for continuous ranges
  within 0 <= x < 1. Auto lets the service choose; here it is Linear (said in the job log).
- Grid takes categorical ranges only, and runs every combination once: its number of
  training jobs is the number of combinations (MaxNumberOfTrainingJobs, if given, must equal it).
- Hyperband has its own early stopping: TrainingJobEarlyStoppingType must be Off.
- Each trial's hyperparameters are the static ones, the tuned ones, and
  ``_tuning_objective_metric`` (the service adds it to every training job it starts).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.errors import UserError
from pipeline.local.jobs.contract import request_hyperparameters

RANDOM, GRID, BAYESIAN, HYPERBAND = "Random", "Grid", "Bayesian", "Hyperband"
STRATEGIES = (BAYESIAN, RANDOM, HYPERBAND, GRID)
AUTO, LINEAR, LOG, REVERSE_LOG = "Auto", "Linear", "Logarithmic", "ReverseLogarithmic"
SCALING_TYPES = (AUTO, LINEAR, LOG, REVERSE_LOG)
MAXIMIZE, MINIMIZE = "Maximize", "Minimize"
EARLY_STOPPING_OFF, EARLY_STOPPING_AUTO = "Off", "Auto"
CONTINUOUS, INTEGER, CATEGORICAL = "Continuous", "Integer", "Categorical"
# SageMaker: the hyperparameter the service adds to every training job of a tuning job.
OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"
# SageMaker: BestTrainingJob and TrainingJobSummaries are what DescribeHyperParameterTuningJob
# and ListTrainingJobsForHyperParameterTuningJob return; the resource limit per job.
MAX_TRAINING_JOBS_LIMIT = 500
# SageMaker's bounds (botocore's service model): ResourceLimits.MaxRuntimeInSeconds,
# BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving, RetryStrategy.MaximumRetryAttempts.
MAX_RUNTIME_BOUNDS = (120, 15768000)
MIN_NOT_IMPROVING = 3
RETRY_BOUNDS = (1, 30)
CONVERGENCE_ENABLED, CONVERGENCE_DISABLED = "Enabled", "Disabled"


class TuningRequestError(UserError):
    """The tuning request cannot run: said in one line, before any trial."""


@dataclass(frozen=True)
class Range:
    """One tuned hyperparameter."""

    name: str
    kind: str  # Continuous | Integer | Categorical
    low: float = 0.0
    high: float = 0.0
    scaling: str = AUTO
    values: tuple[str, ...] = ()

    @property
    def effective_scaling(self) -> str:
        """The scale searched here: Auto is Linear (SageMaker does not say how it chooses)."""
        return LINEAR if self.scaling == AUTO else self.scaling

    def describe(self) -> str:
        if self.kind == CATEGORICAL:
            return f"{self.name} in {list(self.values)}"
        low, high = (int(self.low), int(self.high)) if self.kind == INTEGER else (self.low, self.high)
        scale = self.effective_scaling + (" (Auto)" if self.scaling == AUTO else "")
        return f"{self.name} {self.kind.lower()} [{low}, {high}] {scale}"

    def format(self, value) -> str:
        """A trial's value as the training job's hyperparameter string."""
        if self.kind == INTEGER:
            return str(int(value))
        if self.kind == CONTINUOUS:
            return repr(float(value))
        return str(value)


@dataclass(frozen=True)
class TuningRequest:
    strategy: str
    max_jobs: int
    max_parallel: int
    objective_type: str
    objective_metric: str
    ranges: tuple[Range, ...]
    early_stopping: str
    training_definition: Mapping
    static_hyperparameters: Mapping[str, str]
    seed: int | None = None
    min_resource: int | None = None  # Hyperband
    max_resource: int | None = None
    metric_definitions: tuple = field(default=())
    max_runtime: int | None = None  # ResourceLimits.MaxRuntimeInSeconds
    target_value: float | None = None  # TuningJobCompletionCriteria.TargetObjectiveMetricValue
    max_not_improving: int | None = None  # BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving
    complete_on_convergence: bool = False  # ConvergenceDetected.CompleteOnConvergence
    max_retries: int = 0  # the training definition's RetryStrategy.MaximumRetryAttempts

    @property
    def maximize(self) -> bool:
        return self.objective_type == MAXIMIZE

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    def trial_request(self, tuned: Mapping[str, str]) -> dict:
        """The CreateTrainingJob request of one trial: the definition, its static and tuned
        hyperparameters, the objective's name, and its resources where a training job has them."""
        definition = dict(self.training_definition)
        resources = definition.pop("HyperParameterTuningResourceConfig", None)
        for key in ("StaticHyperParameters", "DefinitionName", "TuningObjective", "HyperParameterRanges",
                    "RetryStrategy"):
            definition.pop(key, None)
        if resources and not definition.get("ResourceConfig"):
            configs = resources.get("InstanceConfigs") or []
            chosen = configs[0] if configs else resources
            definition["ResourceConfig"] = {k: chosen[k] for k in ("InstanceType", "InstanceCount", "VolumeSizeInGB",
                                                                    "VolumeKmsKeyId") if k in chosen}
        definition["HyperParameters"] = {**self.static_hyperparameters, **tuned,
                                         OBJECTIVE_HYPERPARAMETER: self.objective_metric}
        return definition


def _number(text, what: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise TuningRequestError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise TuningRequestError(f"{what} {text!r} is not a finite number")
    return value


def _range(spec: Mapping, kind: str) -> Range:
    name = str(spec.get("Name") or "")
    if not name:
        raise TuningRequestError(f"a {kind} parameter range has no Name")
    where = f"hyperparameter range {name}"
    if kind == CATEGORICAL:
        values = tuple(str(v) for v in spec.get("Values") or [])
        if len(set(values)) < 2:
            shown = list(values)
            raise TuningRequestError(
                f"{where}: a categorical range needs at least two different values (it has {shown}); "
                f"give one value as a static hyperparameter instead")
        return Range(name, kind, values=values)
    low = _number(spec.get("MinValue"), f"{where}: MinValue")
    high = _number(spec.get("MaxValue"), f"{where}: MaxValue")
    scaling = str(spec.get("ScalingType") or AUTO)
    if scaling not in SCALING_TYPES:
        raise TuningRequestError(f"{where}: ScalingType {scaling!r} is not one of {', '.join(SCALING_TYPES)}")
    if kind == INTEGER and not (low.is_integer() and high.is_integer()):
        raise TuningRequestError(f"{where}: an integer range needs whole MinValue and MaxValue "
                                 f"(got {spec.get('MinValue')!r}, {spec.get('MaxValue')!r})")
    if low >= high:
        raise TuningRequestError(
            f"{where}: the range [{spec.get('MinValue')}, {spec.get('MaxValue')}] is empty; MinValue must be "
            f"below MaxValue (a single value is a static hyperparameter)")
    if scaling == LOG and low <= 0:
        raise TuningRequestError(f"{where}: Logarithmic scaling needs MinValue above 0 (got {spec.get('MinValue')}); "
                                 f"use Linear, or raise MinValue")
    if scaling == REVERSE_LOG:
        if kind == INTEGER:
            raise TuningRequestError(f"{where}: ReverseLogarithmic scaling is for continuous ranges only")
        if low < 0 or high >= 1:
            raise TuningRequestError(f"{where}: ReverseLogarithmic scaling needs 0 <= MinValue and MaxValue < 1 "
                                     f"(got [{spec.get('MinValue')}, {spec.get('MaxValue')}])")
    return Range(name, kind, low, high, scaling)


def _positive_int(value, what: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise TuningRequestError(f"{what} {value!r} is not a whole number") from None
    if number < 1:
        raise TuningRequestError(f"{what} must be at least 1 (got {number})")
    return number


def grid_size(ranges: tuple[Range, ...]) -> int:
    return math.prod(len(r.values) for r in ranges)


def grid_points(ranges: tuple[Range, ...]) -> list[dict[str, str]]:
    """Every combination of the categorical values, in the order the ranges list them."""
    return [dict(zip([r.name for r in ranges], combo, strict=True))
            for combo in itertools.product(*(r.values for r in ranges))]


def parse(request: Mapping) -> TuningRequest:
    """The request, checked: the first problem raises ``TuningRequestError`` (one line)."""
    config, definition = _config_and_definition(request)
    strategy = str(config.get("Strategy") or BAYESIAN)
    if strategy not in STRATEGIES:
        raise TuningRequestError(f"Strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    objective_type, metric, metric_definitions = _objective(config, definition)
    ranges, static = _ranges_and_static(config, definition)
    max_jobs, max_parallel = _resource_limits(config, strategy, ranges)
    early, min_resource, max_resource = _early_stopping(config, strategy)
    seed = config.get("RandomSeed")
    return TuningRequest(**_completion(config, definition),
        strategy=strategy, max_jobs=max_jobs, max_parallel=max_parallel, objective_type=objective_type,
        objective_metric=metric, ranges=ranges, early_stopping=early, training_definition=definition,
        static_hyperparameters=static, seed=None if seed is None else int(seed),
        min_resource=min_resource, max_resource=max_resource, metric_definitions=metric_definitions)


def _config_and_definition(request: Mapping) -> tuple[Mapping, Mapping]:
    """The tuning job config and the one training definition; what does not run locally, refused."""
    config = request.get("HyperParameterTuningJobConfig")
    if not isinstance(config, Mapping):
        raise TuningRequestError("the Tuning step has no HyperParameterTuningJobConfig")
    if request.get("TrainingJobDefinitions"):
        raise TuningRequestError(
            "TrainingJobDefinitions (a tuner over several estimators) does not run locally; "
            "give one estimator to HyperparameterTuner")
    if request.get("WarmStartConfig"):
        raise TuningRequestError("WarmStartConfig (tuning from earlier tuning jobs) does not run locally; "
                                 "drop warm_start_config for the local run")
    if request.get("Autotune"):
        raise TuningRequestError("Autotune (ranges chosen by the service) does not run locally; give "
                                 "hyperparameter_ranges and drop autotune")
    definition = request.get("TrainingJobDefinition")
    if not isinstance(definition, Mapping):
        raise TuningRequestError("the Tuning step has no TrainingJobDefinition")
    return config, definition


def _objective(config: Mapping, definition: Mapping) -> tuple[str, str, tuple]:
    """The objective's type and metric, and the metric definitions, one of which captures it."""
    objective = config.get("HyperParameterTuningJobObjective") or {}
    metric = str(objective.get("MetricName") or "")
    objective_type = str(objective.get("Type") or "")
    if not metric:
        raise TuningRequestError("HyperParameterTuningJobObjective.MetricName is missing: name the metric "
                                 "to optimise (objective_metric_name)")
    if objective_type not in (MAXIMIZE, MINIMIZE):
        raise TuningRequestError(f"HyperParameterTuningJobObjective.Type {objective_type!r} must be "
                                 f"{MAXIMIZE} or {MINIMIZE} (objective_type)")
    algorithm = definition.get("AlgorithmSpecification") or {}
    metric_definitions = tuple(algorithm.get("MetricDefinitions") or [])
    names = [d.get("Name") for d in metric_definitions]
    if metric not in names:
        listed = ", ".join(repr(n) for n in names) or "none"
        raise TuningRequestError(
            f"the objective metric {metric!r} is captured by no metric definition (the training "
            f"definition's MetricDefinitions: {listed}); add {{'Name': {metric!r}, 'Regex': ...}} to "
            f"metric_definitions")
    regex = next(d.get("Regex") for d in metric_definitions if d.get("Name") == metric)
    try:
        re.compile(str(regex))
    except re.error as error:
        raise TuningRequestError(f"the metric definition {metric!r}: Regex {regex!r} is not a regular "
                                 f"expression ({error})") from None
    return objective_type, metric, metric_definitions


def _ranges_and_static(config: Mapping, definition: Mapping) -> tuple[tuple[Range, ...], dict[str, str]]:
    """The tuned ranges, each named once, and the static hyperparameters, none of them tuned."""
    declared = config.get("ParameterRanges") or {}
    ranges = tuple(
        [_range(s, CONTINUOUS) for s in declared.get("ContinuousParameterRanges") or []]
        + [_range(s, INTEGER) for s in declared.get("IntegerParameterRanges") or []]
        + [_range(s, CATEGORICAL) for s in declared.get("CategoricalParameterRanges") or []])
    if not ranges:
        raise TuningRequestError("ParameterRanges has no range: give hyperparameter_ranges to tune")
    tuned = [r.name for r in ranges]
    twice = sorted({n for n in tuned if tuned.count(n) > 1})
    if twice:
        raise TuningRequestError(f"hyperparameter(s) {', '.join(twice)} have more than one range")
    static = request_hyperparameters(definition.get("StaticHyperParameters"))
    both = sorted(set(static) & set(tuned))
    if both:
        raise TuningRequestError(f"hyperparameter(s) {', '.join(both)} are both static and tuned; "
                                 f"drop them from the estimator's hyperparameters")
    return ranges, static


def _resource_limits(config: Mapping, strategy: str, ranges: tuple[Range, ...]) -> tuple[int, int]:
    """How many trials in all and at a time (Grid: every combination once, categorical only)."""
    limits = config.get("ResourceLimits") or {}
    max_parallel = _positive_int(limits.get("MaxParallelTrainingJobs", 1), "ResourceLimits.MaxParallelTrainingJobs")
    if strategy == GRID:
        not_categorical = [r.name for r in ranges if r.kind != CATEGORICAL]
        if not_categorical:
            raise TuningRequestError(
                f"the Grid strategy takes categorical ranges only; {', '.join(not_categorical)} "
                f"{'is' if len(not_categorical) == 1 else 'are'} not (make them CategoricalParameter, or use Random)")
        combinations = grid_size(ranges)
        given = limits.get("MaxNumberOfTrainingJobs")
        if given is not None and _positive_int(given, "ResourceLimits.MaxNumberOfTrainingJobs") != combinations:
            raise TuningRequestError(
                f"ResourceLimits.MaxNumberOfTrainingJobs={given}: the Grid strategy runs each of the "
                f"{combinations} combinations once; give max_jobs={combinations} or leave it out")
        max_jobs = combinations
    else:
        if limits.get("MaxNumberOfTrainingJobs") is None:
            raise TuningRequestError("ResourceLimits.MaxNumberOfTrainingJobs is missing (max_jobs)")
        max_jobs = _positive_int(limits["MaxNumberOfTrainingJobs"], "ResourceLimits.MaxNumberOfTrainingJobs")
    if max_jobs > MAX_TRAINING_JOBS_LIMIT:
        raise TuningRequestError(f"ResourceLimits.MaxNumberOfTrainingJobs={max_jobs} is above SageMaker's "
                                 f"limit of {MAX_TRAINING_JOBS_LIMIT}")
    if max_parallel > max_jobs:
        raise TuningRequestError(
            f"ResourceLimits.MaxParallelTrainingJobs={max_parallel} is more than MaxNumberOfTrainingJobs="
            f"{max_jobs}; give max_parallel_jobs <= max_jobs")
    return max_jobs, max_parallel


def _bounded_int(value, what: str, low: int, high: int | None = None) -> int:
    number = _positive_int(value, what)
    if number < low or (high is not None and number > high):
        within = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise TuningRequestError(f"{what}={number} must be {within} (SageMaker's limits)")
    return number


def _completion(config: Mapping, definition: Mapping) -> dict:
    """When the job ends before its last trial (the run time, the completion criteria), and
    how often a trial that failed on the runner's side is tried again."""
    found: dict = {}
    runtime = (config.get("ResourceLimits") or {}).get("MaxRuntimeInSeconds")
    if runtime is not None:
        found["max_runtime"] = _bounded_int(runtime, "ResourceLimits.MaxRuntimeInSeconds", *MAX_RUNTIME_BOUNDS)
    criteria = config.get("TuningJobCompletionCriteria") or {}
    if criteria.get("TargetObjectiveMetricValue") is not None:
        found["target_value"] = _number(criteria["TargetObjectiveMetricValue"],
                                        "TuningJobCompletionCriteria.TargetObjectiveMetricValue")
    not_improving = (criteria.get("BestObjectiveNotImproving") or {}).get("MaxNumberOfTrainingJobsNotImproving")
    if not_improving is not None:
        found["max_not_improving"] = _bounded_int(
            not_improving, "BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving", MIN_NOT_IMPROVING)
    convergence = (criteria.get("ConvergenceDetected") or {}).get("CompleteOnConvergence")
    if convergence is not None:
        if convergence not in (CONVERGENCE_ENABLED, CONVERGENCE_DISABLED):
            raise TuningRequestError(f"ConvergenceDetected.CompleteOnConvergence {convergence!r} must be "
                                     f"{CONVERGENCE_ENABLED} or {CONVERGENCE_DISABLED}")
        found["complete_on_convergence"] = convergence == CONVERGENCE_ENABLED
    retries = (definition.get("RetryStrategy") or {}).get("MaximumRetryAttempts")
    if retries is not None:
        found["max_retries"] = _bounded_int(retries, "RetryStrategy.MaximumRetryAttempts", *RETRY_BOUNDS)
    return found


def _early_stopping(config: Mapping, strategy: str) -> tuple[str, int | None, int | None]:
    """The early stopping type, and Hyperband's MinResource and MaxResource (None elsewhere)."""
    early = str(config.get("TrainingJobEarlyStoppingType") or EARLY_STOPPING_OFF)
    if early not in (EARLY_STOPPING_OFF, EARLY_STOPPING_AUTO):
        raise TuningRequestError(f"TrainingJobEarlyStoppingType {early!r} must be Off or Auto")
    min_resource = max_resource = None
    if strategy == HYPERBAND:
        if early != EARLY_STOPPING_OFF:
            raise TuningRequestError("the Hyperband strategy stops trials itself: TrainingJobEarlyStoppingType "
                                     "must be Off (early_stopping_type='Off')")
        hyperband = (config.get("StrategyConfig") or {}).get("HyperbandStrategyConfig") or {}
        if hyperband.get("MinResource") is not None:
            min_resource = _positive_int(hyperband["MinResource"], "HyperbandStrategyConfig.MinResource")
        if hyperband.get("MaxResource") is not None:
            max_resource = _positive_int(hyperband["MaxResource"], "HyperbandStrategyConfig.MaxResource")
        if min_resource and max_resource and min_resource > max_resource:
            raise TuningRequestError(f"HyperbandStrategyConfig: MinResource {min_resource} is above "
                                     f"MaxResource {max_resource}")
    elif config.get("StrategyConfig"):
        raise TuningRequestError(f"StrategyConfig is for the Hyperband strategy only (this job's is {strategy})")
    return early, min_resource, max_resource
