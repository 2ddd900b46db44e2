"""Step types the runner cannot execute: refused only when reachable, or stubbed on request
(pipeline/local/dag/stubs.py through the runner)."""

from __future__ import annotations

import pytest

from pipeline.local.dag.interpreter import DefinitionError
from pipeline.local.execution import FAILED, NOT_EXECUTED, STOPPED, SUCCEEDED, summary_table
from pipeline.local.runner import PipelineRunner, RunOptions
from pipeline.local.store.storage import LocalStorage
from tests.pipeline.local.test_runner import Capture

DEFINITION = {
    "Version": "2020-12-01",
    "Parameters": [{"Name": "Deploy", "Type": "Boolean", "DefaultValue": False}],
    "Steps": [
        {"Name": "Notify", "Type": "Lambda", "FunctionArn": "arn:aws:lambda:us-east-1:1:function:f",
         "OutputParameters": [{"OutputName": "status", "OutputType": "String"}], "Arguments": {}},
        {"Name": "CheckStatus", "Type": "Condition", "Arguments": {
            "Conditions": [{"Type": "Equals", "LeftValue": {"Get": "Steps.Notify.OutputParameters['status']"},
                            "RightValue": ""}],
            "IfSteps": [],
            "ElseSteps": [{"Name": "Bad", "Type": "Fail", "Arguments": {"ErrorMessage": "not empty"}}]}},
        {"Name": "DeployGate", "Type": "Condition", "Arguments": {
            "Conditions": [{"Type": "Equals", "LeftValue": {"Get": "Parameters.Deploy"}, "RightValue": True}],
            "IfSteps": [{"Name": "Deploy", "Type": "EMR", "Arguments": {}}],
            "ElseSteps": []}},
    ],
}


def runner(tmp_path, stub=None, values=None, **parameters):
    options = RunOptions(workdir=tmp_path, storage=LocalStorage(tmp_path / "store"), echo=False,
                         stream=Capture(), execution_parameters=parameters, stub_unsupported=stub,
                         stub_values=values or {})
    return PipelineRunner(DEFINITION, "stubbed", options)


def test_unsupported_steps_are_refused_only_where_the_run_can_reach_them(tmp_path):
    with pytest.raises(DefinitionError) as refused:
        runner(tmp_path)
    message = str(refused.value)
    assert message.startswith("the local runner cannot run step Notify (Type Lambda); it runs these step types:")
    assert "--stub-unsupported succeed" in message and "Deploy (Type EMR)" not in message
    with pytest.raises(DefinitionError, match=r"Notify \(Type Lambda\), Deploy \(Type EMR\)"):
        runner(tmp_path, Deploy=True)


def test_stubbed_as_succeeded_with_empty_outputs(tmp_path):
    record = runner(tmp_path, "succeed", Deploy=True).run()
    assert record.status == SUCCEEDED, record.failure_reason
    steps = {s.name: s for s in record.steps}
    assert steps["Notify"].status == SUCCEEDED
    assert steps["Notify"].detail == "stubbed (--stub-unsupported succeed): Lambda steps do not run locally"
    assert steps["CheckStatus"].properties == {"Outcome": True}  # read the empty output
    assert steps["Bad"].status == NOT_EXECUTED
    assert steps["Deploy"].status == SUCCEEDED
    assert "stubbed (--stub-unsupported succeed): EMR steps" in summary_table(record)


def test_stubbed_as_skipped_takes_what_depends_on_them_along_and_the_run_is_stopped(tmp_path):
    record = runner(tmp_path, "skip").run()
    # Never Succeeded: SageMaker would have run the skipped step; its nearest state is Stopped.
    assert record.status == STOPPED
    assert record.failure_reason.startswith("--stub-unsupported skip left 1 step(s) not run (Notify); "
                                            "SageMaker would have run them, so this execution is Stopped")
    steps = {s.name: s for s in record.steps}
    assert steps["Notify"].status == NOT_EXECUTED
    assert steps["Notify"].detail.startswith("stubbed (--stub-unsupported skip)")
    assert steps["CheckStatus"].status == NOT_EXECUTED
    assert steps["Deploy"].status == NOT_EXECUTED  # its branch was not taken
    assert "stubbed (--stub-unsupported skip): Lambda steps" in summary_table(record)


def test_stub_values_feed_later_steps(tmp_path):
    # Given a value, the Lambda step is stubbed as Succeeded without --stub-unsupported, and the
    # condition reads the value: not empty, so the else branch (the Fail step).
    record = runner(tmp_path, values={"Notify": {"status": "deployed"}}).run()
    steps = {s.name: s for s in record.steps}
    assert steps["Notify"].status == SUCCEEDED
    assert steps["Notify"].properties == {"OutputParameters": {"status": "deployed"}}
    assert steps["Notify"].detail == "stubbed (--stub status=deployed): Lambda steps do not run locally"
    assert steps["CheckStatus"].properties == {"Outcome": False}
    assert record.status == FAILED and record.failure_reason == "not empty"


def test_stub_values_name_a_stubbable_step_and_a_declared_output(tmp_path):
    with pytest.raises(DefinitionError) as refused:
        runner(tmp_path, values={"Notify": {"state": "x"}})
    assert str(refused.value) == ("--stub Notify.state: Lambda step Notify declares no output 'state' "
                                  "(its OutputParameters: status)")
    with pytest.raises(DefinitionError) as refused:
        runner(tmp_path, values={"CheckStatus": {"x": "y"}})
    assert str(refused.value) == ("--stub CheckStatus.…: the definition has Condition step CheckStatus, "
                                  "which runs locally; steps that can be stubbed: Notify, Deploy")
