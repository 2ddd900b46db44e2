"""The two pipelines, built the way AWS's example notebooks build theirs (abalone, MNIST):
SDK processors and estimators, ``PipelineSession``-style step arguments, a PropertyFile,
a ConditionStep, model registration. Only the session is trainpipe's: ``LocalStoreSession``,
whose uploads (code, data) land in the local store or a local S3 server."""

from __future__ import annotations

from pathlib import Path

from sagemaker import image_uris
from sagemaker.inputs import TrainingInput
from sagemaker.model import Model
from sagemaker.model_metrics import MetricsSource, ModelMetrics
from sagemaker.processing import (
    FrameworkProcessor,
    ProcessingInput,
    ProcessingOutput,
    ScriptProcessor,
)
from sagemaker.sklearn.estimator import SKLearn
from sagemaker.sklearn.processing import SKLearnProcessor
from sagemaker.tensorflow import TensorFlow
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join, JsonGet
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString
from sagemaker.workflow.pipeline import Pipeline
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.step_collections import RegisterModel
from sagemaker.workflow.steps import ProcessingStep, TrainingStep

HERE = Path(__file__).resolve().parent
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
SKLEARN_VERSION = "1.2-1"


def _preprocess_step(session, input_data, instance_type) -> ProcessingStep:
    processor = SKLearnProcessor(framework_version=SKLEARN_VERSION, role=ROLE, instance_type=instance_type,
                                 instance_count=1, base_job_name="digits-preprocess", sagemaker_session=session)
    step_args = processor.run(
        inputs=[ProcessingInput(source=input_data, destination="/opt/ml/processing/input")],
        outputs=[ProcessingOutput(output_name="train", source="/opt/ml/processing/train"),
                 ProcessingOutput(output_name="test", source="/opt/ml/processing/test")],
        code=str(HERE / "preprocess.py"))
    return ProcessingStep(name="PreprocessData", step_args=step_args)


def _evaluation(step_name, processor, step_train, step_process, code, **run) -> tuple[ProcessingStep, PropertyFile]:
    report = PropertyFile(name="EvaluationReport", output_name="evaluation", path="evaluation.json")
    step_args = processor.run(
        inputs=[ProcessingInput(source=step_train.properties.ModelArtifacts.S3ModelArtifacts,
                                destination="/opt/ml/processing/model"),
                ProcessingInput(source=step_process.properties.ProcessingOutputConfig.Outputs["test"].S3Output.S3Uri,
                                destination="/opt/ml/processing/test")],
        outputs=[ProcessingOutput(output_name="evaluation", source="/opt/ml/processing/evaluation")],
        code=code, **run)
    return ProcessingStep(name=step_name, step_args=step_args, property_files=[report]), report


def _metrics(step_eval) -> ModelMetrics:
    return ModelMetrics(model_statistics=MetricsSource(
        s3_uri=Join(on="/", values=[
            step_eval.properties.ProcessingOutputConfig.Outputs["evaluation"].S3Output.S3Uri, "evaluation.json"]),
        content_type="application/json"))


def tensorflow_pipeline(session, bucket: str, name: str = "sdk-tensorflow") -> Pipeline:
    """SKLearn processing -> TensorFlow script-mode training on two instances -> evaluation
    with a PropertyFile -> condition -> RegisterModel (step collection) | Fail."""
    input_data = ParameterString(name="InputData", default_value=f"s3://{bucket}/digits/raw_data_all.csv")
    instance_type = ParameterString(name="ProcessingInstanceType", default_value="ml.m5.xlarge")
    training_instance_count = ParameterInteger(name="TrainingInstanceCount", default_value=2)
    epochs = ParameterInteger(name="Epochs", default_value=2)
    threshold = ParameterFloat(name="AccuracyThreshold", default_value=0.7)

    step_process = _preprocess_step(session, input_data, instance_type)

    estimator = TensorFlow(entry_point="train.py", source_dir=str(HERE / "tf_code"), role=ROLE,
                           instance_count=training_instance_count, instance_type="ml.c5.xlarge",
                           framework_version="2.14", py_version="py310",
                           hyperparameters={"epochs": epochs, "learning_rate": 0.01},
                           output_path=f"s3://{bucket}/models", sagemaker_session=session)
    step_train = TrainingStep(name="TrainModel", step_args=estimator.fit(inputs={"train": TrainingInput(
        s3_data=step_process.properties.ProcessingOutputConfig.Outputs["train"].S3Output.S3Uri,
        content_type="text/csv")}))

    image = image_uris.retrieve("tensorflow", region=session.boto_region_name, version="2.14",
                                instance_type="ml.m5.xlarge", image_scope="training", py_version="py310")
    evaluator = ScriptProcessor(image_uri=image, command=["python3"], instance_type="ml.m5.xlarge",
                                instance_count=1, base_job_name="digits-eval", role=ROLE, sagemaker_session=session)
    step_eval, report = _evaluation("EvaluateModel", evaluator, step_train, step_process,
                                    str(HERE / "tf_code" / "evaluate.py"))

    step_register = RegisterModel(
        name="RegisterDigitsModel", estimator=estimator,
        model_data=step_train.properties.ModelArtifacts.S3ModelArtifacts,
        content_types=["application/json"], response_types=["application/json"],
        inference_instances=["ml.m5.large"], transform_instances=["ml.m5.large"],
        model_package_group_name="sdk-tensorflow-digits", approval_status="Approved",
        model_metrics=_metrics(step_eval))
    step_fail = FailStep(name="AccuracyTooLow", error_message=Join(
        on=" ", values=["accuracy below", threshold]))
    step_cond = ConditionStep(
        name="CheckAccuracy",
        conditions=[ConditionGreaterThanOrEqualTo(
            left=JsonGet(step_name=step_eval.name, property_file=report, json_path="metrics.accuracy.value"),
            right=threshold)],
        if_steps=[step_register], else_steps=[step_fail])
    return Pipeline(name=name, parameters=[input_data, instance_type, training_instance_count, epochs, threshold],
                    steps=[step_process, step_train, step_eval, step_cond], sagemaker_session=session)


def sklearn_pipeline(session, bucket: str, name: str = "sdk-sklearn") -> Pipeline:
    """SKLearn processing -> SKLearn training -> SKLearn FrameworkProcessor evaluation with a PropertyFile ->
    condition -> ModelStep(model.register()) | Fail."""
    input_data = ParameterString(name="InputData", default_value=f"s3://{bucket}/digits/raw_data_all.csv")
    threshold = ParameterFloat(name="AccuracyThreshold", default_value=0.8)

    step_process = _preprocess_step(session, input_data, "ml.m5.xlarge")
    estimator = SKLearn(entry_point="train.py", source_dir=str(HERE / "sklearn_code"), role=ROLE,
                        instance_type="ml.m5.xlarge", framework_version=SKLEARN_VERSION,
                        hyperparameters={"C": 1.0}, output_path=f"s3://{bucket}/models", sagemaker_session=session)
    step_train = TrainingStep(name="TrainModel", step_args=estimator.fit(inputs={"train": TrainingInput(
        s3_data=step_process.properties.ProcessingOutputConfig.Outputs["train"].S3Output.S3Uri,
        content_type="text/csv")}))
    # A FrameworkProcessor with a source_dir: the SDK's runproc.sh unpacks the code under
    # /opt/ml/processing/input/code and runs `python evaluate.py` there.
    evaluator = FrameworkProcessor(estimator_cls=SKLearn, framework_version=SKLEARN_VERSION, role=ROLE,
                                   instance_type="ml.m5.xlarge", instance_count=1, base_job_name="digits-eval",
                                   sagemaker_session=session)
    step_eval, report = _evaluation("EvaluateModel", evaluator, step_train, step_process, "evaluate.py",
                                    source_dir=str(HERE / "sklearn_code"))
    step_cond = register_or_fail(session, estimator.training_image_uri(), step_train, step_eval, report,
                                 threshold, "sdk-sklearn-digits", "text/csv")
    return Pipeline(name=name, parameters=[input_data, threshold],
                    steps=[step_process, step_train, step_eval, step_cond], sagemaker_session=session)


def register_or_fail(session, image_uri: str, step_train, step_eval, report, threshold, group: str,
                     content_type: str) -> ConditionStep:
    """The condition on the evaluation's accuracy: ModelStep(model.register()) with ``image_uri``
    into ``group`` | Fail, as AWS's examples end their pipelines."""
    model = Model(image_uri=image_uri, model_data=step_train.properties.ModelArtifacts.S3ModelArtifacts,
                  role=ROLE, sagemaker_session=session)
    step_register = ModelStep(name="RegisterDigitsModel", step_args=model.register(
        content_types=[content_type], response_types=[content_type],
        inference_instances=["ml.m5.large"], transform_instances=["ml.m5.large"],
        model_package_group_name=group, approval_status="Approved",
        model_metrics=_metrics(step_eval)))
    step_fail = FailStep(name="AccuracyTooLow", error_message=Join(on=" ", values=["accuracy below", threshold]))
    return ConditionStep(
        name="CheckAccuracy",
        conditions=[ConditionGreaterThanOrEqualTo(
            left=JsonGet(step_name=step_eval.name, property_file=report, json_path="metrics.accuracy.value"),
            right=threshold)],
        if_steps=[step_register], else_steps=[step_fail])
