"""Parameter parsing and validation: bad values fail before anything is built."""

from __future__ import annotations

import pytest

from pipeline.definition import parameters as P


def resolve(**overrides):
    return P.resolve(overrides, bucket="b", prefix="p", default_data_records=1797)


def test_defaults():
    values = resolve()
    assert values[P.INPUT_DATA_URI] == "s3://b/p/data/digits/"
    assert values[P.PROCESSES_PER_HOST] == 1  # CPU default training type
    assert values[P.TRAIN_INPUT_MODE] == "File"


def test_processes_per_host_defaults_to_gpus_of_the_instance_type():
    assert resolve(TrainingInstanceType="ml.p3.8xlarge")[P.PROCESSES_PER_HOST] == 4
    assert resolve(TrainingInstanceType="ml.g5.xlarge")[P.PROCESSES_PER_HOST] == 1
    assert resolve(TrainingInstanceType="ml.c5.4xlarge")[P.PROCESSES_PER_HOST] == 1


def test_unknown_instance_type_needs_explicit_processes_per_host():
    with pytest.raises(P.ParameterError, match="pass -p ProcessesPerHost=N"):
        resolve(TrainingInstanceType="ml.trn9.huge")
    assert resolve(TrainingInstanceType="ml.trn9.huge", ProcessesPerHost="2")[P.PROCESSES_PER_HOST] == 2


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("Epochs", "0", "Epochs=0: must be at least 1"),
        ("TrainingInstanceCount", "0", "must be at least 1"),
        ("ProcessingInstanceCount", "-1", "must be at least 1"),
        ("ProcessesPerHost", "0", "must be at least 1"),
        ("BatchSize", "two", "expected an integer"),
        ("AccuracyThreshold", "1.5", "must be at most 1"),
        ("AccuracyThreshold", "-0.1", "must be at least 0"),
        ("TrainInputMode", "Stream", "must be one of File, Pipe, FastFile"),
        ("TrainDistribution", "Random", "must be one of FullyReplicated, ShardedByS3Key"),
        ("ModelApprovalStatus", "Maybe", "must be one of"),
        ("InputDataUri", "/local/path", "must be an s3:// URI"),
        ("Epochs", "2.5", "expected an integer"),
        ("StepsPerExecution", "0", "StepsPerExecution=0: must be at least 1"),
    ],
)
def test_bad_values(name, value, message):
    with pytest.raises(P.ParameterError, match=message):
        resolve(**{name: value})


def test_unknown_names_and_malformed_assignments():
    with pytest.raises(P.ParameterError, match="unknown parameter 'Epoch'"):
        P.parse_assignments(["Epoch=3"])
    with pytest.raises(P.ParameterError, match="expected Name=Value"):
        P.parse_assignments(["Epochs"])
    assert P.parse_assignments(["Epochs=3", "InputDataUri=s3://x/y=z"]) == {
        "Epochs": "3", "InputDataUri": "s3://x/y=z"
    }


def test_warmup_longer_than_training():
    with pytest.raises(P.ParameterError, match="WarmupEpochs=5 is longer than Epochs=3"):
        resolve(Epochs="3", WarmupEpochs="5")


def test_a_short_run_needs_one_flag_the_default_warmup_is_clamped_and_said():
    values = resolve(Epochs="1")
    assert (values["Epochs"], values["WarmupEpochs"]) == (1, 1)
    assert P.warmup_note({"Epochs": "1"}) == (
        "note: WarmupEpochs defaults to 2, longer than Epochs=1: warming up over 1 epoch(s) instead")
    assert P.warmup_note({"Epochs": "3"}) is None and resolve(Epochs="3")["WarmupEpochs"] == 2
    assert P.warmup_note({"Epochs": "1", "WarmupEpochs": "0"}) is None


def test_more_shards_than_the_default_data_can_fill():
    with pytest.raises(P.ParameterError, match="512 shards per split"):
        resolve(TrainingInstanceCount="64", ProcessesPerHost="8")
    # The same workers on a user's own (bigger) data are the user's call.
    values = resolve(TrainingInstanceCount="64", ProcessesPerHost="8", InputDataUri="s3://mine/big/")
    assert P.world_size(values) == 512
    # The digits as images are the same 1,797 records.
    with pytest.raises(P.ParameterError, match="512 shards per split"):
        resolve(TrainingInstanceCount="64", ProcessesPerHost="8", InputDataUri=P.default_image_data_uri("b", "p"))
