"""EvaluateModel (Processing): the trained model on the test split -> evaluation.json."""

from __future__ import annotations

from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.functions import Join, JsonGet
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.steps import ProcessingStep, TrainingStep

from evaluation import report
from pipeline.definition import parameters as P
from pipeline.definition import torch_images
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.names import STEP_EVALUATE
from pipeline.definition.steps.preprocess import split_uri
from pipeline.definition.steps.train import model_artifact


def evaluate_step(
    ctx: BuildContext, step_preprocess: ProcessingStep, step_train: TrainingStep
) -> ProcessingStep:
    evaluation_report = PropertyFile(
        name=report.PROPERTY_FILE_NAME, output_name=report.OUTPUT_NAME, path=report.REPORT_FILE
    )
    # PyTorch: the PyTorch room scores its TorchScript model on the PyTorch training image.
    bundle = "evaluation_torch" if ctx.pytorch else "evaluation"
    image_uri = torch_images.training_image(ctx.settings.region, str(ctx.values[P.PROCESSING_INSTANCE_TYPE])) \
        if ctx.pytorch else None
    step_args = ctx.processor(1, bundle, STEP_EVALUATE, image_uri=image_uri).run(
        inputs=[
            ctx.code_input(bundle),
            ProcessingInput(
                input_name="model", source=model_artifact(step_train), destination=report.MODEL_INPUT_DIR
            ),
            ProcessingInput(
                input_name="test", source=split_uri(step_preprocess, "test"), destination=report.TEST_INPUT_DIR
            ),
            # The class names (a class the test split lacks is still reported, support 0).
            ProcessingInput(
                input_name="manifest", source=split_uri(step_preprocess, "manifest"),
                destination=report.MANIFEST_INPUT_DIR,
            ),
        ],
        outputs=[
            ProcessingOutput(
                output_name=report.OUTPUT_NAME,
                source=report.OUTPUT_DIR,
                destination=ctx.output_uri(STEP_EVALUATE, report.OUTPUT_NAME),
            )
        ],
    )
    return ProcessingStep(
        STEP_EVALUATE, step_args=step_args, property_files=[evaluation_report], cache_config=ctx.cache
    )


def accuracy(step_evaluate: ProcessingStep) -> JsonGet:
    """The test accuracy in the evaluation report (what the gate compares)."""
    (evaluation_report,) = step_evaluate.property_files
    return JsonGet(
        step_name=step_evaluate.name, property_file=evaluation_report, json_path=report.ACCURACY_JSON_PATH
    )


def class_names(step_evaluate: ProcessingStep) -> JsonGet:
    """The class names in the evaluation report, as one JSON-list string (model metadata)."""
    (evaluation_report,) = step_evaluate.property_files
    return JsonGet(
        step_name=step_evaluate.name, property_file=evaluation_report, json_path=report.CLASS_NAMES_JSON_PATH
    )


def report_uri(step_evaluate: ProcessingStep) -> Join:
    """The evaluation.json the evaluate step wrote (the registered model's metrics)."""
    return Join(
        on="/",
        values=[
            step_evaluate.properties.ProcessingOutputConfig.Outputs[report.OUTPUT_NAME].S3Output.S3Uri,
            report.REPORT_FILE,
        ],
    )
