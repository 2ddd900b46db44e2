"""TrainModel's distribution per strategy, and the combinations refused before any job."""

from __future__ import annotations

import json

import pytest

from pipeline.cli.options import add_settings_arguments, settings_from_args
from pipeline.definition import parameters as P
from pipeline.definition.build import STEP_TRAIN, build_definition
from pipeline.definition.schema_check import check_definition
from pipeline.errors import UserError
from pipeline.settings import Settings
from tests.pipeline.definition.test_definition import steps_by_name
from training_entry import contract as training


def _train_hyperparameters(definition):
    return steps_by_name(definition)[STEP_TRAIN]["Arguments"]["HyperParameters"]


@pytest.mark.parametrize("strategy, enabled", [
    ("parameter_server", "sagemaker_parameter_server_enabled"),
    ("mirrored", "sagemaker_multi_worker_mirrored_strategy_enabled"),
])
def test_strategy_becomes_the_estimators_distribution(strategy, enabled):
    definition = build_definition(Settings(distribution=strategy), {
        P.PROCESSES_PER_HOST: "1", P.TRAIN_DISTRIBUTION: "FullyReplicated"})
    check_definition(definition)
    hps = _train_hyperparameters(definition)
    # The SDK turns distribution={"parameter_server"|"multi_worker_mirrored_strategy": ...}
    # into the toolkit's switch; no mpirun.
    assert hps[enabled] == "true"
    assert "sagemaker_mpi_enabled" not in hps
    assert json.loads(hps[training.HP_DISTRIBUTION]) == strategy


def test_horovod_stays_the_default_and_adds_no_hyperparameter():
    hps = _train_hyperparameters(build_definition())
    assert hps["sagemaker_mpi_enabled"] == "true"
    assert training.HP_DISTRIBUTION not in hps
    assert json.dumps(build_definition()) == json.dumps(build_definition(Settings(distribution="horovod")))


@pytest.mark.parametrize("strategy, overrides, message", [
    ("mirrored", {P.PROCESSES_PER_HOST: "2"},
     "ProcessesPerHost=2 with --distribution mirrored: SageMaker starts one training process per "
     "host for it; pass -p ProcessesPerHost=1"),
    ("parameter_server", {P.PROCESSES_PER_HOST: "1", P.TRAIN_DISTRIBUTION: "ShardedByS3Key"},
     "TrainDistribution=ShardedByS3Key with --distribution parameter_server: the first host only "
     "coordinates"),
    ("parameter_server", {P.PROCESSES_PER_HOST: "1", P.TRAIN_INPUT_MODE: "Pipe",
                          P.TRAIN_DISTRIBUTION: "FullyReplicated"},
     "TrainInputMode=Pipe with --distribution parameter_server: the workers' input is a TensorFlow "
     "graph"),
])
def test_combinations_that_cannot_work_are_refused_in_one_line(strategy, overrides, message):
    with pytest.raises(UserError) as caught:
        build_definition(Settings(distribution=strategy), overrides)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_one_host_parameter_server_keeps_every_channel_setting():
    # SageMaker: with one host the toolkit starts no parameter server, only the script.
    check_definition(build_definition(Settings(distribution="parameter_server"), {
        P.PROCESSES_PER_HOST: "1", P.TRAINING_INSTANCE_COUNT: "1", P.TRAIN_INPUT_MODE: "Pipe"}))


def test_mirrored_keeps_pipe_and_sharding():
    definition = build_definition(Settings(distribution="mirrored"), {
        P.PROCESSES_PER_HOST: "1", P.TRAIN_INPUT_MODE: "Pipe", P.TRAIN_DISTRIBUTION: "ShardedByS3Key"})
    check_definition(definition)


def test_horovod_tuning_flags_are_refused_with_another_strategy():
    with pytest.raises(ValueError, match=r"^--fp16-allreduce, --cycle-time-ms tune Horovod's allreduce"):
        Settings(distribution="mirrored", fp16_allreduce=True, cycle_time_ms=2)


def test_the_flag_and_its_environment_variable(monkeypatch):
    import argparse

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    assert settings_from_args(parser.parse_args(["--distribution", "mirrored"])).distribution == "mirrored"
    monkeypatch.setenv("TRAINPIPE_DISTRIBUTION", "parameter_server")
    assert settings_from_args(parser.parse_args([])).distribution == "parameter_server"
    monkeypatch.setenv("TRAINPIPE_DISTRIBUTION", "ring")
    with pytest.raises(UserError, match="distribution=.ring.: must be one of horovod, parameter_server, mirrored"):
        settings_from_args(parser.parse_args([]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--distribution", "ring"])
