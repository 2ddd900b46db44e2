"""The definition JSON: what SageMaker is sent, asserted field by field."""

from __future__ import annotations

import json

import pytest

from evaluation import report
from pipeline.definition import parameters as P
from pipeline.definition.build import (
    STEP_BATCH_CONDITION,
    STEP_CONDITION,
    STEP_EVALUATE,
    STEP_FAIL,
    STEP_PREPROCESS,
    STEP_TRAIN,
    build_definition,
)
from pipeline.definition.bundles import all_bundles
from pipeline.definition.schema_check import check_definition
from pipeline.settings import Settings
from processing import contract as processing
from training_entry import contract as training


@pytest.fixture(scope="module")
def default_definition():
    return build_definition()


@pytest.fixture(scope="module")
def pipe_sharded_definition():
    return build_definition(
        Settings(fusion_threshold_bytes=33554432, cycle_time_ms=5),
        {
            P.TRAIN_INPUT_MODE: "Pipe",
            P.TRAIN_DISTRIBUTION: "ShardedByS3Key",
            P.TRAINING_INSTANCE_COUNT: "2",
            P.PROCESSES_PER_HOST: "4",
        },
    )


def steps_by_name(definition):
    """Every step, those in conditions' branches (nested ones too) included."""
    found = {}

    def walk(steps):
        for step in steps:
            found[step["Name"]] = step
            for branch in ("IfSteps", "ElseSteps"):
                walk(step.get("Arguments", {}).get(branch, []))

    walk(definition["Steps"])
    return found


def test_steps_in_order_with_their_types(default_definition):
    top = [(s["Name"], s["Type"]) for s in default_definition["Steps"]]
    assert top == [
        (STEP_PREPROCESS, "Processing"),
        (STEP_TRAIN, "Training"),
        (STEP_EVALUATE, "Processing"),
        (STEP_CONDITION, "Condition"),
    ]
    condition = default_definition["Steps"][3]["Arguments"]
    assert [(s["Name"], s["Type"]) for s in condition["IfSteps"]] == [
        ("RegisterModel-RegisterModel", "RegisterModel"), (STEP_BATCH_CONDITION, "Condition"),
    ]
    assert [(s["Name"], s["Type"]) for s in condition["ElseSteps"]] == [(STEP_FAIL, "Fail")]


def test_parameter_list_is_the_contract(default_definition):
    declared = [(p["Name"], p["Type"]) for p in default_definition["Parameters"]]
    expected_types = {str: "String", int: "Integer", float: "Float"}
    assert declared == [(spec.name, expected_types[spec.type]) for spec in P.pipeline_specs("tensorflow")]
    assert [name for name, _ in declared] == [
        "InputDataUri", "LabelColumn", "ProcessingInstanceType", "ProcessingInstanceCount", "TrainingInstanceType",
        "TrainingInstanceCount", "ProcessesPerHost", "TrainInputMode", "TrainDistribution", "Epochs",
        "BatchSize", "BaseLearningRate", "WarmupEpochs", "StepsPerExecution", "ModelArchitecture",
        "ImageSize", "ImageRecords", "Augmentation", "HeadEpochs", "FineTuneLayers", "FineTuneLearningRateFactor",
        "AccuracyThreshold", "ModelApprovalStatus", "BatchInputUri", "BatchInstanceCount",
    ]


def test_mpi_hyperparameters(pipe_sharded_definition):
    hps = steps_by_name(pipe_sharded_definition)[STEP_TRAIN]["Arguments"]["HyperParameters"]
    assert hps["sagemaker_mpi_enabled"] == "true"
    assert hps["sagemaker_mpi_num_of_processes_per_host"] == {
        "Std:Join": {"On": "", "Values": [{"Get": "Parameters.ProcessesPerHost"}]}
    }
    assert json.loads(hps["sagemaker_mpi_custom_mpi_options"]) == (
        f"-x {training.HOROVOD_FUSION_THRESHOLD_ENV}=33554432 -x {training.HOROVOD_CYCLE_TIME_ENV}=5"
    )
    assert json.loads(hps["sagemaker_program"]) == training.ENTRY_POINT
    for name, parameter in [
        (training.HP_EPOCHS, P.EPOCHS), (training.HP_BATCH_SIZE, P.BATCH_SIZE),
        (training.HP_BASE_LEARNING_RATE, P.BASE_LEARNING_RATE),
        (training.HP_WARMUP_EPOCHS, P.WARMUP_EPOCHS),
        (training.HP_STEPS_PER_EXECUTION, P.STEPS_PER_EXECUTION),
        (training.HP_MODEL_ARCHITECTURE, P.MODEL_ARCHITECTURE), (training.HP_IMAGE_SIZE, P.IMAGE_SIZE),
        (training.HP_AUGMENTATION, P.AUGMENTATION), (training.HP_HEAD_EPOCHS, P.HEAD_EPOCHS),
        (training.HP_FINE_TUNE_LAYERS, P.FINE_TUNE_LAYERS),
        (training.HP_FINE_TUNE_LR_FACTOR, P.FINE_TUNE_LR_FACTOR),
    ]:
        reference = {"Get": f"Parameters.{parameter}"}
        # The SDK joins numbers into strings; strings go as they are.
        assert hps[name] in ({"Std:Join": {"On": "", "Values": [reference]}}, reference)
    params = {p["Name"]: p["DefaultValue"] for p in pipe_sharded_definition["Parameters"]}
    assert params[P.PROCESSES_PER_HOST] == 4 and params[P.TRAINING_INSTANCE_COUNT] == 2


def test_channels_distribution_and_input_mode(pipe_sharded_definition):
    args = steps_by_name(pipe_sharded_definition)[STEP_TRAIN]["Arguments"]
    channels = {c["ChannelName"]: c for c in args["InputDataConfig"]}
    for name in training.DATA_CHANNELS:
        source = channels[name]["DataSource"]["S3DataSource"]
        assert channels[name]["InputMode"] == {"Get": f"Parameters.{P.TRAIN_INPUT_MODE}"}
        assert source["S3DataDistributionType"] == {"Get": f"Parameters.{P.TRAIN_DISTRIBUTION}"}
        assert source["S3Uri"] == {
            "Get": f"Steps.{STEP_PREPROCESS}.ProcessingOutputConfig.Outputs['{name}'].S3Output.S3Uri"
        }
    manifest = channels[training.CHANNEL_MANIFEST]
    assert manifest["InputMode"] == "File"
    assert manifest["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "FullyReplicated"
    assert training.CHANNEL_INIT not in channels
    params = {p["Name"]: p["DefaultValue"] for p in pipe_sharded_definition["Parameters"]}
    assert params[P.TRAIN_INPUT_MODE] == "Pipe"
    assert params[P.TRAIN_DISTRIBUTION] == "ShardedByS3Key"


def test_processing_is_told_the_shard_count(default_definition):
    app = steps_by_name(default_definition)[STEP_PREPROCESS]["Arguments"]["AppSpecification"]
    arguments = app["ContainerArguments"]
    count = arguments[arguments.index(processing.ARG_INSTANCE_COUNT) + 1]
    per_host = arguments[arguments.index(processing.ARG_PROCESSES_PER_HOST) + 1]
    assert count == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.TrainingInstanceCount"}]}}
    assert per_host == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.ProcessesPerHost"}]}}
    # Image trees are stored at the training size unless ImageRecords=original.
    assert arguments[arguments.index(processing.ARG_IMAGE_SIZE) + 1] == \
        {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.ImageSize"}]}}
    assert arguments[arguments.index(processing.ARG_IMAGE_RECORDS) + 1] == {"Get": "Parameters.ImageRecords"}
    assert app["ContainerEntrypoint"] == ["python3", "-m", "processing.preprocess"]
    outputs = steps_by_name(default_definition)[STEP_PREPROCESS]["Arguments"][
        "ProcessingOutputConfig"]["Outputs"]
    assert {o["OutputName"]: o["S3Output"]["LocalPath"] for o in outputs} == processing.OUTPUT_DIRS


def test_property_file_path_equals_jsonget_path(default_definition):
    steps = steps_by_name(default_definition)
    (property_file,) = steps[STEP_EVALUATE]["PropertyFiles"]
    assert property_file == {
        "PropertyFileName": report.PROPERTY_FILE_NAME,
        "OutputName": report.OUTPUT_NAME,
        "FilePath": report.REPORT_FILE,
    }
    (condition,) = steps[STEP_CONDITION]["Arguments"]["Conditions"]
    assert condition["Type"] == "GreaterThanOrEqualTo"
    assert condition["LeftValue"] == {
        "Std:JsonGet": {
            "PropertyFile": {"Get": f"Steps.{STEP_EVALUATE}.PropertyFiles.{report.PROPERTY_FILE_NAME}"},
            "Path": report.ACCURACY_JSON_PATH,
        }
    }
    assert condition["RightValue"] == {"Get": f"Parameters.{P.ACCURACY_THRESHOLD}"}
    # The path the condition reads is the one evaluation writes.
    written = report.build_report(0.93, 0.2, 10, {})
    assert report.read_json_path(written, condition["LeftValue"]["Std:JsonGet"]["Path"]) == 0.93


def test_fail_step_message_carries_value_and_threshold(default_definition):
    message = steps_by_name(default_definition)[STEP_FAIL]["Arguments"]["ErrorMessage"]["Std:Join"]
    values = message["Values"]
    assert {"Get": f"Parameters.{P.ACCURACY_THRESHOLD}"} in values
    assert any("Std:JsonGet" in v for v in values if isinstance(v, dict))


def test_register_model_uses_evaluation_as_model_metrics(default_definition):
    register = steps_by_name(default_definition)["RegisterModel-RegisterModel"]["Arguments"]
    assert register["ModelPackageGroupName"] == Settings().model_package_group
    assert register["ModelApprovalStatus"] == {"Get": f"Parameters.{P.MODEL_APPROVAL_STATUS}"}
    statistics = register["ModelMetrics"]["ModelQuality"]["Statistics"]
    assert statistics["S3Uri"]["Std:Join"]["Values"][-1] == report.REPORT_FILE
    (container,) = register["InferenceSpecification"]["Containers"]
    assert container["ModelDataUrl"] == {"Get": f"Steps.{STEP_TRAIN}.ModelArtifacts.S3ModelArtifacts"}


def test_metric_definitions_come_from_the_contract(default_definition):
    spec = steps_by_name(default_definition)[STEP_TRAIN]["Arguments"]["AlgorithmSpecification"]
    assert spec["MetricDefinitions"] == training.METRIC_DEFINITIONS
    assert {d["Name"] for d in spec["MetricDefinitions"]} == {
        "loss", "accuracy", "val_loss", "val_accuracy", "throughput",
        # The scaling advisor's inputs (issue 13), read back from SageMaker's metrics.
        "step_time", "step_spread", "cpu_time", "parameters", "tensors",
    }


def test_code_locations_are_content_addressed(default_definition):
    bundles = all_bundles()
    text = json.dumps(default_definition)
    for bundle in bundles.values():
        assert bundle.key_prefix(Settings().prefix) in text
    # A PyTorch build names its own bundles (the ZeRO one only with a ZeRO strategy).
    for strategy in ("ddp", "zero3"):
        torch = json.dumps(build_definition(Settings(), {P.FRAMEWORK: "pytorch", P.PROCESSES_PER_HOST: "2",
                                                         P.STRATEGY: strategy}))
        named = {name for name, b in all_bundles(framework="pytorch").items() if b.key_prefix("trainpipe") in torch}
        assert named == {"processing", "training_zero" if strategy == "zero3" else "training_torch", "evaluation_torch"}


def test_two_builds_are_byte_identical():
    assert json.dumps(build_definition()) == json.dumps(build_definition())


def test_definitions_pass_the_schema_check(default_definition, pipe_sharded_definition):
    check_definition(default_definition)
    check_definition(pipe_sharded_definition)


def test_init_channel_only_when_asked():
    definition = build_definition(Settings(init_model_uri="s3://bucket/weights/model.tar.gz"))
    channels = {
        c["ChannelName"]: c
        for c in steps_by_name(definition)[STEP_TRAIN]["Arguments"]["InputDataConfig"]
    }
    init = channels[training.CHANNEL_INIT]
    assert init["DataSource"]["S3DataSource"]["S3Uri"] == "s3://bucket/weights/model.tar.gz"
    assert init["InputMode"] == "File"


def test_built_offline(no_network):
    build_definition(Settings(region="eu-west-1", bucket="my-bucket"))


def test_images_follow_the_build_time_instance_types(default_definition):
    """Processing and evaluation run on ProcessingInstanceType's image (GPU or CPU), chosen at
    build time as training's is from TrainingInstanceType."""

    def images(definition):
        steps = steps_by_name(definition)
        return (
            steps[STEP_PREPROCESS]["Arguments"]["AppSpecification"]["ImageUri"],
            steps[STEP_EVALUATE]["Arguments"]["AppSpecification"]["ImageUri"],
            steps[STEP_TRAIN]["Arguments"]["AlgorithmSpecification"]["TrainingImage"],
        )

    preprocess, evaluate, train = images(default_definition)
    assert "-cpu-" in preprocess and preprocess == evaluate
    # Training runs on trainpipe's image (AWS's plus Horovod), built FROM the same CPU image.
    assert ":" + preprocess.rsplit(":", 1)[1] + "-horovod" in train
    gpu_processing = build_definition(parameter_overrides={P.PROCESSING_INSTANCE_TYPE: "ml.g4dn.xlarge"})
    preprocess, evaluate, train = images(gpu_processing)
    assert "-gpu-" in preprocess and preprocess == evaluate
    assert "-cpu-" in train
