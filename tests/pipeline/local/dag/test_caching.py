"""Step cache keys follow SageMaker's documented attributes; entries expire."""

from __future__ import annotations

import json
import time

import pytest

from pipeline.local.dag import caching


def training_args(**changes):
    args = {
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "HyperParameters": {"epochs": "3"},
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://b/exec-1/train"}}}],
        "CheckpointConfig": {"S3Uri": "s3://b/checkpoints/{Execution.PipelineExecutionId}"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "ResourceConfig": {"InstanceCount": 2, "InstanceType": "ml.c5.xlarge"},
    }
    args.update(changes)
    return args


def key(args, step_type="Training", step="TrainModel"):
    return caching.cache_key(caching.key_material("pipe", step, step_type, args))


def test_the_key_covers_what_sagemaker_documents_and_nothing_else():
    base = key(training_args())
    # Not in SageMaker's list: output location, resources (and job names, never in the args).
    assert key(training_args(OutputDataConfig={"S3OutputPath": "s3://b/elsewhere"})) == base
    assert key(training_args(ResourceConfig={"InstanceCount": 4, "InstanceType": "ml.p3.2xlarge"})) == base
    # In it: hyperparameters, inputs (an upstream step re-run in a new execution moves them).
    assert key(training_args(HyperParameters={"epochs": "4"})) != base
    assert key(training_args(InputDataConfig=[{"ChannelName": "train", "DataSource": {
        "S3DataSource": {"S3Uri": "s3://b/exec-2/train"}}}])) != base
    assert key(training_args(), step="Other") != base
    processing = {"AppSpecification": {"ContainerArguments": ["--x", "1"]}, "Environment": {},
                  "ProcessingInputs": [], "ProcessingOutputConfig": {"Outputs": [{"S3Output": {"S3Uri": "s3://b/e1"}}]}}
    moved = json.loads(json.dumps(processing))
    moved["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"] = "s3://b/e2"
    assert key(processing, "Processing") == key(moved, "Processing")


@pytest.mark.parametrize(("text", "seconds"), [
    ("P30D", 30 * 86400), ("PT1H", 3600), ("P1DT12H", 36 * 3600), ("30d", 30 * 86400),
    ("T16m", 16 * 60), ("P1W", 7 * 86400), ("PT90S", 90)])
def test_iso_durations(text, seconds):
    assert caching.parse_duration(text) == seconds


def test_bad_durations_are_refused():
    for text in ("", "P", "30 days", "PT1X"):
        with pytest.raises(ValueError, match="ISO 8601"):
            caching.parse_duration(text)


def test_entries_are_found_until_they_expire(tmp_path, monkeypatch):
    cache = caching.StepCache(tmp_path)
    cache.store("k1", "TrainModel", "exec-1", {"TrainingJobName": "j"}, {"m": 1})
    entry = cache.lookup("k1", "PT1H")
    assert entry.execution_id == "exec-1" and entry.properties == {"TrainingJobName": "j"}
    assert cache.lookup("k2", "PT1H") is None
    later = time.time() + 2 * 3600
    monkeypatch.setattr(caching.time, "time", lambda: later)
    assert cache.lookup("k1", "PT1H") is None
    assert cache.lookup("k1", "P1D") is not None


def test_a_cached_tuning_step_needs_its_completed_trials_models():
    """get_top_model_s3_uri(k) reads the k-th trial's model: each completed trial's must still be there."""
    properties = {"TrainingJobDefinition": {"OutputDataConfig": {"S3OutputPath": "s3://b/models/"}},
                  "TrainingJobSummaries": [{"TrainingJobName": "t-002", "TrainingJobStatus": "Completed"},
                                           {"TrainingJobName": "t-001", "TrainingJobStatus": "Stopped"}]}
    assert caching.output_uris("Tuning", properties) == ["s3://b/models/t-002/output/model.tar.gz"]


def test_a_tuning_steps_key_is_its_config_and_the_training_definitions_listed_children():
    """SageMaker's key attributes for Tuning: the tuning config (strategy, early stopping, ...)
    counts; of the training definition only AlgorithmSpecification, HyperParameterRanges,
    InputDataConfig, StaticHyperParameters and TuningObjective do (not where models go)."""
    def key(config: dict, definition: dict) -> str:
        attributes = {"HyperParameterTuningJobConfig": config, "TrainingJobDefinition": definition}
        return caching.cache_key(caching.key_material("p", "TuneModel", "Tuning", attributes))

    config = {"Strategy": "Random", "TrainingJobEarlyStoppingType": "Off"}
    definition = {"StaticHyperParameters": {"epochs": "3"}, "OutputDataConfig": {"S3OutputPath": "s3://b/a"}}
    assert key(config, definition) != key({**config, "TrainingJobEarlyStoppingType": "Auto"}, definition)
    assert key(config, definition) != key(config, {**definition, "StaticHyperParameters": {"epochs": "4"}})
    assert key(config, definition) == key(config, {**definition, "OutputDataConfig": {"S3OutputPath": "s3://b/z"}})
