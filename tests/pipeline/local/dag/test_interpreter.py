"""Expressions, conditions and step order, as the definition JSON spells them."""

from __future__ import annotations

import copy

import pytest

from pipeline.definition import build as D
from pipeline.local.dag import interpreter as I
from pipeline.local.dag.interpreter import Context, ExpressionError, Unresolved, evaluate


@pytest.fixture(scope="module")
def trainpipe_definition():
    return D.build_definition()


PREPROCESS_PROPERTIES = {
    "ProcessingJobName": "job-1",
    "ProcessingOutputConfig": {"Outputs": [
        {"OutputName": "train", "S3Output": {"S3Uri": "s3://b/x/train", "LocalPath": "/opt/ml/processing/output/train"}},
        {"OutputName": "evaluation", "S3Output": {"S3Uri": "s3://b/x/eval", "LocalPath": "/opt/ml/processing/output/e"}},
    ]},
}


def make_context(**overrides) -> Context:
    documents = {"s3://b/x/eval/evaluation.json": {"metrics": {"accuracy": {"value": 0.93}},
                                                   "items": [{"v": 1}, {"v": 2}]}}
    base = dict(
        parameters={"Epochs": 3, "Threshold": 0.9, "Mode": "Pipe"},
        execution={"PipelineExecutionId": "exec-1", "PipelineName": "p"},
        properties={"Prep": PREPROCESS_PROPERTIES,
                    "Train": {"ModelArtifacts": {"S3ModelArtifacts": "s3://b/m/model.tar.gz"},
                              "FinalMetricDataList": [{"MetricName": "loss", "Value": 0.1}]}},
        property_files={"Prep": [{"PropertyFileName": "Report", "OutputName": "evaluation",
                                  "FilePath": "evaluation.json"}]},
        read_json=documents.__getitem__,
    )
    base.update(overrides)
    return Context(**base)


def test_get_parameters_execution_and_step_properties():
    ctx = make_context()
    assert evaluate({"Get": "Parameters.Epochs"}, ctx) == 3
    assert evaluate({"Get": "Execution.PipelineExecutionId"}, ctx) == "exec-1"
    uri = "Steps.Prep.ProcessingOutputConfig.Outputs['train'].S3Output.S3Uri"
    assert evaluate({"Get": uri}, ctx) == "s3://b/x/train"
    assert evaluate({"Get": "Steps.Prep.ProcessingOutputConfig.Outputs[1].OutputName"}, ctx) == "evaluation"
    assert evaluate({"Get": "Steps.Train.FinalMetricDataList['loss'].Value"}, ctx) == 0.1
    # Nested anywhere in a request: dicts and lists are evaluated all the way down.
    request = {"A": [{"B": {"Get": "Parameters.Mode"}}, "plain", 7], "C": {"D": None}}
    assert evaluate(request, ctx) == {"A": [{"B": "Pipe"}, "plain", 7], "C": {"D": None}}


def test_get_errors_name_what_is_missing():
    ctx = make_context()
    with pytest.raises(ExpressionError, match="no parameter 'Nope'"):
        evaluate({"Get": "Parameters.Nope"}, ctx)
    with pytest.raises(ExpressionError, match="no element named 'missing'.*train"):
        evaluate({"Get": "Steps.Prep.ProcessingOutputConfig.Outputs['missing'].S3Output"}, ctx)
    with pytest.raises(Unresolved, match="step Later has not run"):
        evaluate({"Get": "Steps.Later.Anything"}, ctx)


def test_std_join_spells_values_like_json():
    ctx = make_context()
    join = {"Std:Join": {"On": "/", "Values": ["s3:/", "b", {"Get": "Execution.PipelineExecutionId"},
                                               {"Get": "Parameters.Epochs"}, True, 0.5]}}
    assert evaluate(join, ctx) == "s3://b/exec-1/3/true/0.5"
    assert evaluate({"Std:Join": {"On": "", "Values": [{"Get": "Parameters.Epochs"}]}}, ctx) == "3"


def test_json_get_reads_the_property_file_with_a_dotted_path():
    ctx = make_context()
    body = {"PropertyFile": {"Get": "Steps.Prep.PropertyFiles.Report"}, "Path": "metrics.accuracy.value"}
    assert evaluate({"Std:JsonGet": body}, ctx) == 0.93
    body["Path"] = "items[1].v"
    assert evaluate({"Std:JsonGet": body}, ctx) == 2
    body["Path"] = "metrics.precision.value"
    with pytest.raises(ExpressionError, match="path 'metrics.precision.value' not found"):
        evaluate({"Std:JsonGet": body}, ctx)
    by_uri = {"S3Uri": {"Std:Join": {"On": "/", "Values": ["s3://b/x/eval", "evaluation.json"]}},
              "Path": "$.metrics.accuracy.value"}
    assert evaluate({"Std:JsonGet": by_uri}, ctx) == 0.93


@pytest.mark.parametrize(("condition", "expected"), [
    ({"Type": "Equals", "LeftValue": {"Get": "Parameters.Mode"}, "RightValue": "Pipe"}, True),
    ({"Type": "Equals", "LeftValue": {"Get": "Parameters.Epochs"}, "RightValue": 3.0}, True),
    ({"Type": "GreaterThan", "LeftValue": 0.93, "RightValue": {"Get": "Parameters.Threshold"}}, True),
    ({"Type": "GreaterThan", "LeftValue": 0.9, "RightValue": 0.9}, False),
    ({"Type": "GreaterThanOrEqualTo", "LeftValue": 0.9, "RightValue": {"Get": "Parameters.Threshold"}}, True),
    ({"Type": "LessThan", "LeftValue": 2, "RightValue": {"Get": "Parameters.Epochs"}}, True),
    ({"Type": "LessThanOrEqualTo", "LeftValue": 4, "RightValue": {"Get": "Parameters.Epochs"}}, False),
    ({"Type": "In", "QueryValue": {"Get": "Parameters.Mode"}, "Values": ["File", "Pipe"]}, True),
    ({"Type": "In", "QueryValue": "FastFile", "Values": ["File", "Pipe"]}, False),
    ({"Type": "Not", "Condition": {"Type": "Equals", "LeftValue": 1, "RightValue": 2}}, True),
    ({"Type": "Or", "Conditions": [{"Type": "Equals", "LeftValue": 1, "RightValue": 2},
                                   {"Type": "LessThan", "LeftValue": 1, "RightValue": 2}]}, True),
    ({"Type": "Or", "Conditions": [{"Type": "Equals", "LeftValue": 1, "RightValue": 2}]}, False),
])
def test_conditions_of_every_type_the_sdk_emits(condition, expected):
    outcome, account = I.evaluate_condition(condition, make_context())
    assert outcome is expected
    assert account


def test_the_real_condition_reads_accuracy_against_the_threshold(trainpipe_definition):
    condition_step = next(s for s in trainpipe_definition["Steps"] if s["Name"] == D.STEP_CONDITION)
    ctx = make_context(
        parameters={"AccuracyThreshold": 0.9},
        properties={D.STEP_EVALUATE: {"ProcessingOutputConfig": {"Outputs": [
            {"OutputName": "evaluation", "S3Output": {"S3Uri": "s3://b/eval"}}]}}},
        property_files=I.property_files_of(I.plan(trainpipe_definition)),
        read_json={"s3://b/eval/evaluation.json": {"metrics": {"accuracy": {"value": 0.95}}}}.__getitem__,
    )
    outcome, account = I.evaluate_conditions(condition_step["Arguments"]["Conditions"], ctx)
    assert outcome is True and account == "0.95 >= 0.9 is true"


def test_plan_orders_the_trainpipe_dag_by_its_data(trainpipe_definition):
    nodes = I.plan(trainpipe_definition)
    register = f"{D.STEP_REGISTER}-{D.STEP_REGISTER}"
    batch_model = f"{D.STEP_BATCH_MODEL}-CreateModel"
    assert [n.name for n in nodes] == [D.STEP_PREPROCESS, D.STEP_TRAIN, D.STEP_EVALUATE,
                                       D.STEP_CONDITION, register, D.STEP_BATCH_CONDITION, batch_model,
                                       D.STEP_BATCH_KIND, D.STEP_TRANSFORM_IMAGES, D.STEP_TRANSFORM_TABLE,
                                       D.STEP_FAIL]
    by_name = {n.name: n for n in nodes}
    # Batch inference waits for the registration and runs only in the gate's if-branch.
    assert register in by_name[D.STEP_BATCH_CONDITION].depends_on
    assert by_name[D.STEP_BATCH_CONDITION].branch == (D.STEP_CONDITION, True)
    assert by_name[D.STEP_TRANSFORM_IMAGES].branch == (D.STEP_BATCH_KIND, True)
    assert by_name[D.STEP_TRANSFORM_TABLE].branch == (D.STEP_BATCH_KIND, False)
    assert set(by_name[D.STEP_EVALUATE].depends_on) == {D.STEP_PREPROCESS, D.STEP_TRAIN}
    assert by_name[register].branch == (D.STEP_CONDITION, True)
    assert by_name[D.STEP_FAIL].branch == (D.STEP_CONDITION, False)
    assert set(by_name[D.STEP_CONDITION].depends_on) == {D.STEP_EVALUATE}


def test_plan_follows_data_not_listing_order_and_honours_depends_on(trainpipe_definition):
    shuffled = copy.deepcopy(trainpipe_definition)
    shuffled["Steps"].reverse()  # Condition first, Preprocess last
    assert [n.name for n in I.plan(shuffled)][:3] == [D.STEP_PREPROCESS, D.STEP_TRAIN, D.STEP_EVALUATE]
    steps = [{"Name": "B", "Type": "Fail", "Arguments": {}, "DependsOn": ["A"]},
             {"Name": "A", "Type": "Fail", "Arguments": {}}]
    assert [n.name for n in I.plan({"Steps": steps})] == ["A", "B"]


def test_plan_refuses_what_it_cannot_run():
    with pytest.raises(I.DefinitionError, match=r"cannot run step Notify \(Type Lambda\).*Processing, Training"):
        I.plan({"Steps": [{"Name": "Notify", "Type": "Lambda", "Arguments": {}}]})
    cycle = [{"Name": "A", "Type": "Fail", "Arguments": {"ErrorMessage": {"Get": "Steps.B.X"}}},
             {"Name": "B", "Type": "Fail", "Arguments": {"ErrorMessage": {"Get": "Steps.A.X"}}}]
    with pytest.raises(I.DefinitionError, match="cycle: A, B"):
        I.plan({"Steps": cycle})
    with pytest.raises(I.DefinitionError, match="unknown step"):
        I.plan({"Steps": [{"Name": "A", "Type": "Fail", "Arguments": {}, "DependsOn": ["Ghost"]}]})


def test_parameters_take_declared_types_and_refuse_unknown_names(trainpipe_definition):
    values = I.resolve_parameters(trainpipe_definition, {"Epochs": "4", "BaseLearningRate": "0.01"})
    assert values["Epochs"] == 4 and values["BaseLearningRate"] == 0.01
    assert values["TrainInputMode"] == "File"
    with pytest.raises(I.DefinitionError, match="unknown parameter"):
        I.resolve_parameters(trainpipe_definition, {"Epoch": 3})
    with pytest.raises(I.DefinitionError, match="Epochs='many': expected an Integer"):
        I.resolve_parameters(trainpipe_definition, {"Epochs": "many"})


def test_parse_path_tokens():
    assert I.parse_path("A.B['k'][0].C") == ["A", "B", ("k",), 0, "C"]
    with pytest.raises(ExpressionError, match="cannot parse"):
        I.parse_path("A..B")


def test_parameter_references_are_gets_not_text():
    joined = {"Std:Join": {"On": "/", "Values": [{"Get": "Parameters.Raw"}, "part"]}}
    assert list(I.parameter_references({"Get": "Parameters.Raw"})) == ["Raw"]
    assert list(I.parameter_references(joined)) == ["Raw"]
    # The old rule ("Parameters." anywhere in the JSON) took these for parameter references.
    assert list(I.parameter_references("s3://bucket/Parameters.d/raw/")) == []
    assert list(I.parameter_references({"Get": "Steps.Parameters.ProcessingOutputConfig"})) == []


def test_a_condition_on_whether_a_parameter_was_given_reads_as_that_fact():
    """Issue 36: CheckBatchInput said ``not ( == ) is false``."""
    given = {"Type": "Not", "Condition": {"Type": "Equals", "LeftValue": {"Get": "Parameters.BatchInputUri"},
                                          "RightValue": ""}}
    for value, outcome, account in [("", False, "no BatchInputUri given"),
                                    ("s3://b/new/", True, "BatchInputUri given")]:
        ctx = I.Context(parameters={"BatchInputUri": value}, execution={})
        assert I.evaluate_conditions([given], ctx) == (outcome, account)
    other = {"Type": "GreaterThanOrEqualTo", "LeftValue": 0.95, "RightValue": 0.9}
    assert I.evaluate_conditions([other], I.Context(parameters={}, execution={})) == (True, "0.95 >= 0.9 is true")
