"""``--tune N``: TuneModel (a TuningStep over TrainModel's estimator) in TrainModel's place,
the evaluation and the registration on its best trial's model; without it, the definition is
the one it always was."""

from __future__ import annotations

import json
import subprocess
import sys

from pipeline.definition.build import STEP_EVALUATE, STEP_TRAIN, STEP_TUNE, build_definition
from pipeline.definition.schema_check import check_definition
from pipeline.local.jobs.tuning import hyperparameter_ranges
from pipeline.settings import Settings
from tests.pipeline.definition.test_definition import steps_by_name
from training_entry import contract as training


def test_the_default_definition_has_no_tuning():
    steps = steps_by_name(build_definition())
    assert STEP_TRAIN in steps and STEP_TUNE not in steps
    assert all(s["Type"] != "Tuning" for s in steps.values())


def test_tune_6_replaces_trainmodel_with_a_tuning_step_the_local_runner_accepts():
    definition = build_definition(Settings(tune_jobs=6))
    check_definition(definition)
    steps = steps_by_name(definition)
    assert STEP_TRAIN not in steps and steps[STEP_TUNE]["Type"] == "Tuning"
    arguments = steps[STEP_TUNE]["Arguments"]
    config = arguments["HyperParameterTuningJobConfig"]
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 6, "MaxParallelTrainingJobs": 2}
    assert config["HyperParameterTuningJobObjective"] == {"Type": "Maximize", "MetricName": "val_accuracy"}
    ranges = {r["Name"]: r for kind in config["ParameterRanges"].values() for r in kind}
    assert ranges[training.HP_BASE_LEARNING_RATE]["ScalingType"] == "Logarithmic"
    assert set(ranges) == {training.HP_BASE_LEARNING_RATE, training.HP_BATCH_SIZE, training.HP_WARMUP_EPOCHS}
    static = arguments["TrainingJobDefinition"]["StaticHyperParameters"]
    assert not set(ranges) & set(static)  # tuned, so not static
    assert "sagemaker_job_name" not in static  # no build timestamp: the cache key holds between builds
    assert "CheckpointConfig" not in arguments["TrainingJobDefinition"]  # trials must not resume each other
    # The request passes the runner's checks once its parameters are evaluated (literals here).
    literal = json.loads(json.dumps(arguments), object_hook=lambda d: "1" if set(d) & {"Get", "Std:Join"} else d)
    hyperparameter_ranges.parse(literal)
    # The evaluation reads the best trial's model, as get_top_model_s3_uri names it.
    model_input = next(i for i in steps[STEP_EVALUATE]["Arguments"]["ProcessingInputs"] if i["InputName"] == "model")
    values = model_input["S3Input"]["S3Uri"]["Std:Join"]["Values"]
    assert {"Get": f"Steps.{STEP_TUNE}.TrainingJobSummaries[0].TrainingJobName"} in values
    assert values[-1] == "output/model.tar.gz"


def test_tune_is_a_flag_of_definition():
    done = subprocess.run([sys.executable, "-m", "pipeline", "definition", "--tune", "3", "--tune-parallel", "3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    config = steps_by_name(json.loads(done.stdout))[STEP_TUNE]["Arguments"]["HyperParameterTuningJobConfig"]
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 3, "MaxParallelTrainingJobs": 3}
    refused = subprocess.run([sys.executable, "-m", "pipeline", "definition", "--tune", "-1"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "-1 trials: give N >= 1" in refused.stderr.strip().splitlines()[-1]
