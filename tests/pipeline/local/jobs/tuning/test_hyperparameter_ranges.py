"""The CreateHyperParameterTuningJob request, read and checked as SageMaker checks it: each
refusal is one line naming the range or setting and the fix (unit tests, milliseconds)."""

from __future__ import annotations

import copy

import pytest

from pipeline.local.jobs.tuning import hyperparameter_ranges as hr

REQUEST = {
    "HyperParameterTuningJobConfig": {
        "Strategy": "Random",
        "ResourceLimits": {"MaxNumberOfTrainingJobs": 6, "MaxParallelTrainingJobs": 2},
        "TrainingJobEarlyStoppingType": "Auto",
        "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "validation:accuracy"},
        "ParameterRanges": {
            "ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0.0001", "MaxValue": "0.1",
                                           "ScalingType": "Logarithmic"}],
            "IntegerParameterRanges": [{"Name": "batch", "MinValue": "16", "MaxValue": "256", "ScalingType": "Auto"}],
            "CategoricalParameterRanges": [{"Name": "opt", "Values": ['"adam"', '"sgd"']}],
        },
    },
    "TrainingJobDefinition": {
        "StaticHyperParameters": {"epochs": "3", "sagemaker_program": '"train.py"'},
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File",
                                   "MetricDefinitions": [{"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"}]},
        "HyperParameterTuningResourceConfig": {"InstanceCount": 2, "InstanceType": "ml.c5.xlarge", "VolumeSizeInGB": 30},
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/models"},
        "RoleArn": "arn:aws:iam::111122223333:role/R",
    },
}


def changed(**paths) -> dict:
    request = copy.deepcopy(REQUEST)
    for path, value in paths.items():
        *parents, last = path.split("__")
        node = request
        for key in parents:
            node = node[key] if not key.isdigit() else node[int(key)]
        node[last if not last.isdigit() else int(last)] = value
    return request


def test_a_good_request_reads_as_the_service_would():
    request = hr.parse(REQUEST)
    assert (request.strategy, request.max_jobs, request.max_parallel) == ("Random", 6, 2)
    assert request.maximize and request.early_stopping == "Auto"
    assert [(r.name, r.kind, r.effective_scaling) for r in request.ranges] == [
        ("lr", "Continuous", "Logarithmic"), ("batch", "Integer", "Linear"), ("opt", "Categorical", "Linear")]
    trial = request.trial_request({"lr": "0.01", "batch": "32", "opt": '"sgd"'})
    # The service passes static, tuned and the objective's name; resources as a training job's.
    assert trial["HyperParameters"] == {"epochs": "3", "sagemaker_program": '"train.py"', "lr": "0.01",
                                        "batch": "32", "opt": '"sgd"',
                                        "_tuning_objective_metric": "validation:accuracy"}
    assert trial["ResourceConfig"] == {"InstanceType": "ml.c5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}
    assert "StaticHyperParameters" not in trial and "HyperParameterTuningResourceConfig" not in trial


BAD = [
    ({"HyperParameterTuningJobConfig__ParameterRanges__ContinuousParameterRanges__0__MinValue": "0.5"},
     "hyperparameter range lr: the range [0.5, 0.1] is empty"),
    ({"HyperParameterTuningJobConfig__ParameterRanges__IntegerParameterRanges__0__MaxValue": "16"},
     "hyperparameter range batch: the range [16, 16] is empty"),
    ({"HyperParameterTuningJobConfig__ParameterRanges__CategoricalParameterRanges__0__Values": ['"adam"']},
     "hyperparameter range opt: a categorical range needs at least two different values"),
    ({"HyperParameterTuningJobConfig__HyperParameterTuningJobObjective__MetricName": "validation:loss"},
     "the objective metric 'validation:loss' is captured by no metric definition"),
    ({"HyperParameterTuningJobConfig__ResourceLimits__MaxParallelTrainingJobs": 7},
     "MaxParallelTrainingJobs=7 is more than MaxNumberOfTrainingJobs=6; give max_parallel_jobs <= max_jobs"),
    ({"HyperParameterTuningJobConfig__ParameterRanges__ContinuousParameterRanges__0__MinValue": "0"},
     "Logarithmic scaling needs MinValue above 0"),
    ({"HyperParameterTuningJobConfig__ParameterRanges__ContinuousParameterRanges__0__ScalingType": "ReverseLogarithmic",
      "HyperParameterTuningJobConfig__ParameterRanges__ContinuousParameterRanges__0__MaxValue": "1.5"},
     "ReverseLogarithmic scaling needs 0 <= MinValue and MaxValue < 1"),
    ({"HyperParameterTuningJobConfig__Strategy": "Grid"},
     "the Grid strategy takes categorical ranges only; lr, batch are not"),
    ({"HyperParameterTuningJobConfig__Strategy": "Hyperband"},
     "the Hyperband strategy stops trials itself: TrainingJobEarlyStoppingType must be Off"),
    ({"TrainingJobDefinition__StaticHyperParameters__lr": "0.1"},
     "hyperparameter(s) lr are both static and tuned"),
    ({"HyperParameterTuningJobConfig__HyperParameterTuningJobObjective__Type": "Best"},
     "HyperParameterTuningJobObjective.Type 'Best' must be Maximize or Minimize"),
]


@pytest.mark.parametrize(("paths", "expected"), BAD, ids=[e.split(":")[0][:40] for _, e in BAD])
def test_each_bad_request_is_one_line_naming_it(paths, expected):
    with pytest.raises(hr.TuningRequestError) as raised:
        hr.parse(changed(**paths))
    assert expected in str(raised.value)
    assert "\n" not in str(raised.value)


def test_grid_runs_every_combination_once():
    ranges = {"CategoricalParameterRanges": [{"Name": "a", "Values": ["1", "2", "3"]},
                                             {"Name": "b", "Values": ["x", "y"]}]}
    request = changed(HyperParameterTuningJobConfig__Strategy="Grid",
                      HyperParameterTuningJobConfig__ParameterRanges=ranges,
                      HyperParameterTuningJobConfig__ResourceLimits={"MaxParallelTrainingJobs": 2})
    parsed = hr.parse(request)
    assert parsed.max_jobs == 6  # SageMaker: the number of combinations, max_jobs or not
    assert hr.grid_points(parsed.ranges)[:3] == [{"a": "1", "b": "x"}, {"a": "1", "b": "y"}, {"a": "2", "b": "x"}]
    request["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxNumberOfTrainingJobs"] = 4
    with pytest.raises(hr.TuningRequestError, match="runs each of the 6 combinations once; give max_jobs=6"):
        hr.parse(request)
