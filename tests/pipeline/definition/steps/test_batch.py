"""Batch inference after registration (pipeline/definition/steps/batch.py): the parameters,
the steps and their requests, and a BatchInstanceCount below 1 refused in one line."""

from __future__ import annotations

import pytest

from evaluation import report
from pipeline.cli.main import main
from pipeline.definition import parameters as P
from pipeline.definition.build import (
    STEP_BATCH_CONDITION,
    STEP_BATCH_KIND,
    STEP_BATCH_MODEL,
    STEP_CONDITION,
    STEP_EVALUATE,
    STEP_REGISTER,
    STEP_TRAIN,
    STEP_TRANSFORM_IMAGES,
    STEP_TRANSFORM_TABLE,
    build_definition,
)
from pipeline.definition.schema_check import check_definition
from pipeline.definition.steps import batch
from pipeline.settings import INFERENCE_FRAMEWORK_VERSION, INFERENCE_INSTANCE_TYPE
from tests.pipeline.definition.test_definition import steps_by_name

CREATE_MODEL = f"{STEP_BATCH_MODEL}-CreateModel"  # the SDK's ModelStep names it so


@pytest.fixture(scope="module")
def definition():
    return build_definition(parameter_overrides={P.BATCH_INPUT_URI: "s3://b/new/", P.BATCH_INSTANCE_COUNT: 3})


def resolve(**overrides):
    return P.resolve(overrides, bucket="b", prefix="p", default_data_records=1797)


def test_parameters_default_to_no_batch_inference_on_one_instance():
    values = resolve()
    assert values[P.BATCH_INPUT_URI] == "" and values[P.BATCH_INSTANCE_COUNT] == 1
    # An empty value from the command line is "off", not an error.
    assert resolve(BatchInputUri="")[P.BATCH_INPUT_URI] == ""
    assert resolve(BatchInputUri="s3://b/new/", BatchInstanceCount="2")[P.BATCH_INSTANCE_COUNT] == 2


@pytest.mark.parametrize("name, value, message", [
    (P.BATCH_INSTANCE_COUNT, "0", "BatchInstanceCount=0: must be at least 1"),
    (P.BATCH_INSTANCE_COUNT, "two", "BatchInstanceCount='two': expected an integer"),
    (P.BATCH_INPUT_URI, "https://example.com/x/", "BatchInputUri='https://example.com/x/': must be an s3:// URI"),
])
def test_bad_batch_values_are_refused(name, value, message):
    with pytest.raises(P.ParameterError, match=message):
        resolve(**{name: value})


def test_a_batch_instance_count_of_0_is_one_line_before_anything_is_built(capsys):
    assert main(["definition", "-p", "BatchInputUri=s3://b/new/", "-p", "BatchInstanceCount=0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert "BatchInstanceCount=0: must be at least 1" in captured.err


def test_the_batch_steps_follow_registration_in_the_gates_if_branch(definition):
    (gate,) = [s for s in definition["Steps"] if s["Name"] == STEP_CONDITION]
    register, batch_input = gate["Arguments"]["IfSteps"]
    assert register["Name"] == f"{STEP_REGISTER}-{STEP_REGISTER}"
    assert batch_input["Name"] == STEP_BATCH_CONDITION and batch_input["DependsOn"] == [register["Name"]]
    # Empty BatchInputUri: the condition is false, and nothing of the batch runs.
    assert batch_input["Arguments"]["Conditions"] == [{"Type": "Not", "Condition": {
        "Type": "Equals", "LeftValue": {"Get": f"Parameters.{P.BATCH_INPUT_URI}"}, "RightValue": ""}}]
    assert batch_input["Arguments"]["ElseSteps"] == []
    assert [s["Name"] for s in batch_input["Arguments"]["IfSteps"]] == [CREATE_MODEL, STEP_BATCH_KIND]
    by_kind = batch_input["Arguments"]["IfSteps"][1]["Arguments"]
    assert by_kind["Conditions"] == [{"Type": "Equals", "RightValue": report.KIND_IMAGE, "LeftValue": {
        "Std:JsonGet": {"PropertyFile": {"Get": f"Steps.{STEP_EVALUATE}.PropertyFiles.{report.PROPERTY_FILE_NAME}"},
                        "Path": report.KIND_JSON_PATH}}}]
    assert [s["Name"] for s in by_kind["IfSteps"]] == [STEP_TRANSFORM_IMAGES]
    assert [s["Name"] for s in by_kind["ElseSteps"]] == [STEP_TRANSFORM_TABLE]


def test_the_model_is_the_trained_archive_in_the_tensorflow_serving_image(definition):
    model = steps_by_name(definition)[CREATE_MODEL]
    assert model["Type"] == "Model"
    container = model["Arguments"]["PrimaryContainer"]
    assert container["ModelDataUrl"] == {"Get": f"Steps.{STEP_TRAIN}.ModelArtifacts.S3ModelArtifacts"}
    assert container["Image"].endswith(f"/tensorflow-inference:{INFERENCE_FRAMEWORK_VERSION}-cpu")
    # No inference script: the local runner and SageMaker serve the SavedModel as it is.
    assert "SAGEMAKER_PROGRAM" not in container.get("Environment", {})
    # The registered package serves the same image and archive.
    registered = steps_by_name(definition)[f"{STEP_REGISTER}-{STEP_REGISTER}"]["Arguments"]
    (registered_container,) = registered["InferenceSpecification"]["Containers"]
    assert registered_container["Image"] == container["Image"]


@pytest.mark.parametrize("name, content_type, split_type, strategy, assemble", [
    (STEP_TRANSFORM_IMAGES, "application/x-image", "None", "SingleRecord", "None"),
    (STEP_TRANSFORM_TABLE, "text/csv", "Line", "MultiRecord", "Line"),
])
def test_each_kind_of_data_is_sent_as_the_server_reads_it(definition, name, content_type, split_type,
                                                          strategy, assemble):
    step = steps_by_name(definition)[name]
    assert step["Type"] == "Transform" and "CacheConfig" not in step
    args = step["Arguments"]
    assert args["ModelName"] == {"Get": f"Steps.{CREATE_MODEL}.ModelName"}
    source = args["TransformInput"]
    assert source["DataSource"]["S3DataSource"] == {"S3DataType": "S3Prefix",
                                                    "S3Uri": {"Get": f"Parameters.{P.BATCH_INPUT_URI}"}}
    assert (source["ContentType"], source["SplitType"]) == (content_type, split_type)
    assert (args["BatchStrategy"], args["MaxPayloadInMB"]) == (strategy, batch.MAX_PAYLOAD_MB)
    assert args["TransformResources"] == {"InstanceCount": {"Get": f"Parameters.{P.BATCH_INSTANCE_COUNT}"},
                                          "InstanceType": INFERENCE_INSTANCE_TYPE}
    output = args["TransformOutput"]
    assert (output["AssembleWith"], output["Accept"]) == (assemble, batch.ACCEPT)
    # Per execution, under the artifact prefix: <key>.out for each input object.
    assert output["S3OutputPath"]["Std:Join"]["Values"][-3:] == [name, "output", batch.OUTPUT_NAME]
    assert output["S3OutputPath"]["Std:Join"]["Values"][1] == {"Get": "Execution.PipelineExecutionId"}


def test_the_parameters_defaults_come_from_the_build(definition):
    defaults = {p["Name"]: p.get("DefaultValue") for p in definition["Parameters"]}
    assert defaults[P.BATCH_INPUT_URI] == "s3://b/new/" and defaults[P.BATCH_INSTANCE_COUNT] == 3
    assert {p["Name"]: p.get("DefaultValue") for p in build_definition()["Parameters"]}[P.BATCH_INPUT_URI] == ""


def test_the_definition_with_the_batch_steps_passes_the_schema_check(definition):
    check_definition(definition)
