"""The readable definition diff (upsert's plan, and the pull-request comment in CI)."""

from __future__ import annotations

import copy
import json

import pytest

from pipeline.cli.main import main
from pipeline.cloud.diff import definition_diff
from pipeline.definition.build import STEP_FAIL, STEP_REGISTER, STEP_TRAIN, build_definition
from pipeline.settings import Settings


@pytest.fixture(scope="module")
def base() -> dict:
    return build_definition()


def top_level_step(definition: dict, name: str) -> dict:
    return next(s for s in definition["Steps"] if s["Name"] == name)


def test_nothing_deployed(base):
    assert definition_diff(None, base).startswith("new pipeline: 11 steps (PreprocessData, TrainModel,")


def test_identical(base):
    assert definition_diff(base, copy.deepcopy(base)) == "no changes: the deployed definition is identical"


def test_parameter_default_and_hyperparameter(base):
    new = build_definition(parameter_overrides={"Epochs": 3})
    text = definition_diff(base, new)
    assert "parameters:\n  ~ Epochs: default 10 -> 3" in text
    # The hyperparameter refers to the parameter, so the step itself did not change.
    assert "steps:" not in text


def test_a_changed_value_inside_a_step_is_named_by_its_path(base):
    new = build_definition(Settings(fusion_threshold_bytes=1 << 20))
    text = definition_diff(base, new)
    assert f"  ~ {STEP_TRAIN}\n" in text
    assert "HOROVOD_FUSION_THRESHOLD=1048576" in text
    assert "Arguments.HyperParameters.sagemaker_mpi_custom_mpi_options" in text


def test_added_and_removed_steps_including_condition_branches(base):
    new = copy.deepcopy(base)
    condition = next(s for s in new["Steps"] if s["Type"] == "Condition")
    condition["Arguments"]["ElseSteps"] = []
    new["Steps"].append({"Name": "Extra", "Type": "Fail", "Arguments": {"ErrorMessage": "x"}})
    text = definition_diff(base, new)
    assert "  + Extra (Fail)" in text
    assert f"  - {STEP_FAIL} (Fail)" in text
    assert STEP_REGISTER not in text.replace(f"{STEP_REGISTER}-", "")  # untouched branch


def test_reordered_channels_are_no_change(base):
    new = copy.deepcopy(base)
    channels = top_level_step(new, STEP_TRAIN)["Arguments"]["InputDataConfig"]
    channels.reverse()
    assert definition_diff(base, new) == "only the order of steps or of named items changed"


def test_cli_diff(tmp_path, base, capsys):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(base))
    new.write_text(json.dumps(build_definition(parameter_overrides={"BatchSize": 64})))
    assert main(["diff", str(old), str(new)]) == 0
    assert "~ BatchSize: default 32 -> 64" in capsys.readouterr().out
    old.write_text("not json")
    assert main(["diff", str(old), str(new)]) == 2
    assert "not a readable definition JSON" in capsys.readouterr().err
