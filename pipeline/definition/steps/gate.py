"""CheckAccuracy (Condition): accuracy >= threshold -> RegisterModel (and the batch inference
of steps/batch.py), otherwise AccuracyTooLow."""

from __future__ import annotations

from sagemaker.model_metrics import MetricsSource, ModelMetrics
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join, JsonGet
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.steps import ProcessingStep, TrainingStep

from evaluation import report
from pipeline.definition import parameters as P
from pipeline.definition.steps.batch import batch_steps, serving_model
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.evaluate import accuracy, class_names, report_uri
from pipeline.definition.steps.names import STEP_CONDITION, STEP_FAIL, STEP_REGISTER
from pipeline.settings import INFERENCE_INSTANCE_TYPE


def accuracy_gate(
    ctx: BuildContext, step_train: TrainingStep, step_evaluate: ProcessingStep
) -> ConditionStep:
    test_accuracy = accuracy(step_evaluate)
    return ConditionStep(
        STEP_CONDITION,
        conditions=[
            ConditionGreaterThanOrEqualTo(left=test_accuracy, right=ctx.params[P.ACCURACY_THRESHOLD])
        ],
        # Batch inference (when BatchInputUri is given): the model that passed the gate, once registered.
        if_steps=[register := register_step(ctx, step_train, step_evaluate),
                  batch_steps(ctx, step_train, step_evaluate, after=register)],
        else_steps=[fail_step(ctx, test_accuracy)],
    )


def register_step(ctx: BuildContext, step_train: TrainingStep, step_evaluate: ProcessingStep) -> ModelStep:
    register_args = serving_model(ctx, step_train).register(
        content_types=["application/json"],
        response_types=["application/json"],
        inference_instances=[INFERENCE_INSTANCE_TYPE],
        transform_instances=[INFERENCE_INSTANCE_TYPE],
        model_package_group_name=ctx.settings.model_package_group,
        approval_status=ctx.params[P.MODEL_APPROVAL_STATUS],
        model_metrics=ModelMetrics(
            model_statistics=MetricsSource(s3_uri=report_uri(step_evaluate), content_type="application/json")
        ),
        # The classes by name, index = the model's output position (evaluation.json's list).
        customer_metadata_properties={report.METADATA_KEY_CLASS_NAMES: class_names(step_evaluate)},
    )
    return ModelStep(STEP_REGISTER, step_args=register_args)


def fail_step(ctx: BuildContext, test_accuracy: JsonGet) -> FailStep:
    return FailStep(
        STEP_FAIL,
        error_message=Join(
            on="",
            values=[
                "Test accuracy ", test_accuracy, " is below ", P.ACCURACY_THRESHOLD, "=",
                ctx.params[P.ACCURACY_THRESHOLD], "; the model was not registered.",
            ],
        ),
    )
