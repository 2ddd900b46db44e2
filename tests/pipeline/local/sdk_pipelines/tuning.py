"""A tuning pipeline built with the plain SDK v2, the way AWS's tuning examples build theirs:
``HyperparameterTuner`` over a script-mode estimator, ``TuningStep(step_args=tuner.fit(...))``,
an evaluation of the top model (``get_top_model_s3_uri``), a condition on the best trial's
objective, and ``ModelStep(model.register())`` of the top model."""

from __future__ import annotations

from pathlib import Path

from sagemaker.inputs import TrainingInput
from sagemaker.model import Model
from sagemaker.model_metrics import MetricsSource, ModelMetrics
from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.sklearn.estimator import SKLearn
from sagemaker.sklearn.processing import SKLearnProcessor
from sagemaker.tuner import (
    CategoricalParameter,
    ContinuousParameter,
    HyperparameterTuner,
    IntegerParameter,
)
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.parameters import ParameterFloat, ParameterString
from sagemaker.workflow.pipeline import Pipeline
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.steps import ProcessingStep, TuningStep

HERE = Path(__file__).resolve().parent
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
SKLEARN_VERSION = "1.2-1"
OBJECTIVE = "validation:accuracy"


def tuner_of(session, bucket: str, *, strategy: str = "Random", max_jobs: int = 4, max_parallel_jobs: int = 2,
             early_stopping_type: str = "Auto", epochs: int = 6, ranges: dict | None = None,
             **tuner_args) -> HyperparameterTuner:
    estimator = SKLearn(entry_point="train.py", source_dir=str(HERE / "tuning_code"), role=ROLE,
                        instance_type="ml.m5.xlarge", framework_version=SKLEARN_VERSION,
                        hyperparameters={"epochs": epochs, "epoch_seconds": 0.4},
                        output_path=f"s3://{bucket}/models", sagemaker_session=session)
    ranges = ranges if ranges is not None else {
        "learning_rate": ContinuousParameter(0.001, 1.0, scaling_type="Logarithmic"),
        "batch_size": IntegerParameter(16, 128),
        "optimizer": CategoricalParameter(["sgd", "momentum"]),
    }
    return HyperparameterTuner(
        estimator, objective_metric_name=OBJECTIVE, hyperparameter_ranges=ranges,
        metric_definitions=[{"Name": OBJECTIVE, "Regex": r"val_accuracy=([0-9.]+)"}],
        strategy=strategy, max_jobs=max_jobs, max_parallel_jobs=max_parallel_jobs,
        early_stopping_type=early_stopping_type, objective_type="Maximize", **tuner_args)


def tuning_pipeline(session, bucket: str, name: str = "sdk-tuning", tuner: HyperparameterTuner | None = None,
                    legacy: bool = False) -> Pipeline:
    """Tune -> evaluate the top model -> condition on the best trial's objective -> register
    the top model | fail. ``legacy``: ``TuningStep(tuner=..., inputs=...)``, the old form."""
    train_data = ParameterString(name="TrainData", default_value=f"s3://{bucket}/digits/train")
    test_data = ParameterString(name="TestData", default_value=f"s3://{bucket}/digits/test")
    threshold = ParameterFloat(name="ObjectiveThreshold", default_value=0.8)
    tuner = tuner or tuner_of(session, bucket)
    inputs = {"train": TrainingInput(s3_data=train_data, content_type="text/csv")}
    step_tune = (TuningStep(name="TuneModel", tuner=tuner, inputs=inputs) if legacy
                 else TuningStep(name="TuneModel", step_args=tuner.fit(inputs=inputs)))
    top_model = step_tune.get_top_model_s3_uri(top_k=0, s3_bucket=bucket, prefix="models")

    evaluator = SKLearnProcessor(framework_version=SKLEARN_VERSION, role=ROLE, instance_type="ml.m5.xlarge",
                                 instance_count=1, base_job_name="tuned-eval", sagemaker_session=session)
    report = PropertyFile(name="EvaluationReport", output_name="evaluation", path="evaluation.json")
    step_eval = ProcessingStep(name="EvaluateTopModel", property_files=[report], step_args=evaluator.run(
        inputs=[ProcessingInput(source=top_model, destination="/opt/ml/processing/model"),
                ProcessingInput(source=test_data, destination="/opt/ml/processing/test")],
        outputs=[ProcessingOutput(output_name="evaluation", source="/opt/ml/processing/evaluation")],
        code=str(HERE / "tuning_code" / "evaluate.py")))

    model = Model(image_uri=tuner.estimator.training_image_uri(), model_data=top_model, role=ROLE,
                  sagemaker_session=session)
    step_register = ModelStep(name="RegisterTopModel", step_args=model.register(
        content_types=["text/csv"], response_types=["text/csv"], inference_instances=["ml.m5.large"],
        transform_instances=["ml.m5.large"], model_package_group_name="sdk-tuned-digits",
        approval_status="Approved", model_metrics=ModelMetrics(model_statistics=MetricsSource(
            s3_uri=Join(on="/", values=[
                step_eval.properties.ProcessingOutputConfig.Outputs["evaluation"].S3Output.S3Uri,
                "evaluation.json"]),
            content_type="application/json")),
        description=Join(on=" ", values=["best trial", step_tune.properties.BestTrainingJob.TrainingJobName])))
    step_fail = FailStep(name="ObjectiveTooLow", error_message=Join(on=" ", values=[
        "best trial", step_tune.properties.BestTrainingJob.TrainingJobName, "below", threshold]))
    step_cond = ConditionStep(
        name="CheckBestObjective",
        conditions=[ConditionGreaterThanOrEqualTo(
            left=step_tune.properties.BestTrainingJob.FinalHyperParameterTuningJobObjectiveMetric.Value,
            right=threshold)],
        if_steps=[step_register], else_steps=[step_fail])
    return Pipeline(name=name, parameters=[train_data, test_data, threshold],
                    steps=[step_tune, step_eval, step_cond], sagemaker_session=session)
