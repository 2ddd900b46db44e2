"""Batch inference after registration: the trained model over ``BatchInputUri``, on
``BatchInstanceCount`` instances, one ``<key>.out`` per input object.

::

    CheckBatchInput ── BatchInputUri != "" ──> BatchModel (CreateModel) ──> CheckBatchDataKind
    (Condition)                                                            ├─ image ──> BatchTransformImages
                                                                           └─ table ──> BatchTransformTable

An empty ``BatchInputUri`` (the default) decides the first condition before anything runs,
so nothing is created. The data's kind is only known once the data has been read (an
execution may pass images or a table), so the evaluation report's ``kind`` picks one of two
Transform steps: a request's ContentType and SplitType are fixed per step, and images and
CSV rows reach the TensorFlow Serving container differently (serving/codec.py):

- images: each object is one request, ``application/x-image`` (the model's bytes signature);
- tables: CSV files of feature rows (the training header's order, without the label; a
  header line is skipped), split by line and sent as ``text/csv`` batches of up to
  ``MaxPayloadInMB``; each batch answers one JSON line.

Each prediction carries the class name (the model's ``classes`` output beside
``probabilities``).
"""

from __future__ import annotations

import warnings

from sagemaker.model import Model
from sagemaker.tensorflow import TensorFlowModel
from sagemaker.transformer import Transformer
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionEquals, ConditionNot
from sagemaker.workflow.functions import JsonGet
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.steps import ProcessingStep, TrainingStep, TransformStep

from evaluation import report
from pipeline.definition import parameters as P
from pipeline.definition import torch_images
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.names import (
    STEP_BATCH_CONDITION,
    STEP_BATCH_KIND,
    STEP_BATCH_MODEL,
    STEP_TRANSFORM_IMAGES,
    STEP_TRANSFORM_TABLE,
)
from pipeline.definition.steps.train import model_artifact
from pipeline.settings import INFERENCE_FRAMEWORK_VERSION, INFERENCE_INSTANCE_TYPE

OUTPUT_NAME = "predictions"  # <execution>/<transform step>/output/predictions/<key>.out
ACCEPT = "application/json"  # TF Serving's {"predictions": [...]}
# SageMaker: the TFS container's request limit, and batch transform's default payload.
MAX_PAYLOAD_MB = 6
# What each kind of data is sent as (serving/codec.py reads both).
IMAGE_REQUESTS = {"content_type": "application/x-image", "split_type": "None"}
TABLE_REQUESTS = {"content_type": "text/csv", "split_type": "Line"}
BATCH_DESCRIPTION = "batch inference"  # CheckBatchInput's Description: what it gates


def serving_model(ctx: BuildContext, step_train: TrainingStep) -> TensorFlowModel | Model:
    """The trained model in SageMaker's TensorFlow Serving image (no inference script: the
    archive's ``<version>/saved_model.pb`` is served as is); registered and batch-served alike.
    PyTorch: AWS's PyTorch inference image, which runs the archive's ``code/inference.py``
    (``training_torch/export.py`` writes it beside the TorchScript model)."""
    if ctx.pytorch:
        return Model(
            model_data=model_artifact(step_train),
            role=ctx.settings.role_arn,
            image_uri=torch_images.inference_image(ctx.settings.region, INFERENCE_INSTANCE_TYPE),
            # SageMaker: the inference toolkit imports this module from <model>/code.
            env={"SAGEMAKER_PROGRAM": "inference.py"},
            sagemaker_session=ctx.session,
        )
    return TensorFlowModel(
        model_data=model_artifact(step_train),
        role=ctx.settings.role_arn,
        framework_version=INFERENCE_FRAMEWORK_VERSION,
        image_uri=ctx.image(INFERENCE_INSTANCE_TYPE, scope="inference"),
        sagemaker_session=ctx.session,
    )


def batch_steps(ctx: BuildContext, step_train: TrainingStep, step_evaluate: ProcessingStep,
                after: ModelStep) -> ConditionStep:
    """CheckBatchInput, with the model and the Transform steps in its if-branch; it waits
    for ``after`` (the registration), so predictions come from a registered model."""
    with warnings.catch_warnings():
        # ModelStep (the SDK's recommended way) builds the deprecated CreateModelStep inside,
        # and warns about its own use of it.
        warnings.filterwarnings("ignore", "We are deprecating the use of CreateModelStep", DeprecationWarning)
        create_model = ModelStep(
            STEP_BATCH_MODEL, step_args=serving_model(ctx, step_train).create(instance_type=INFERENCE_INSTANCE_TYPE)
        )
    (evaluation_report,) = step_evaluate.property_files
    data_kind = JsonGet(step_name=step_evaluate.name, property_file=evaluation_report,
                        json_path=report.KIND_JSON_PATH)
    by_kind = ConditionStep(
        STEP_BATCH_KIND,
        conditions=[ConditionEquals(left=data_kind, right=report.KIND_IMAGE)],
        if_steps=[_transform(ctx, STEP_TRANSFORM_IMAGES, create_model, IMAGE_REQUESTS)],
        else_steps=[_transform(ctx, STEP_TRANSFORM_TABLE, create_model, TABLE_REQUESTS)],
    )
    return ConditionStep(
        STEP_BATCH_CONDITION,
        # What the condition gates, in words: Studio shows it, and the local run says
        # "no BatchInputUri given: batch inference skipped".
        description=BATCH_DESCRIPTION,
        conditions=[ConditionNot(expression=ConditionEquals(left=ctx.params[P.BATCH_INPUT_URI], right=""))],
        if_steps=[create_model, by_kind],
        depends_on=[after],
    )


def _transform(ctx: BuildContext, name: str, create_model: ModelStep, requests: dict) -> TransformStep:
    per_line = requests["split_type"] == "Line"
    transformer = Transformer(
        model_name=create_model.properties.ModelName,
        instance_count=ctx.params[P.BATCH_INSTANCE_COUNT],
        instance_type=INFERENCE_INSTANCE_TYPE,
        # SageMaker: MultiRecord packs lines into requests of up to max_payload MB; Line puts
        # each answer on its own line of the object's .out.
        strategy="MultiRecord" if per_line else "SingleRecord",
        assemble_with="Line" if per_line else "None",
        max_payload=MAX_PAYLOAD_MB,
        accept=ACCEPT,
        output_path=ctx.output_uri(name, OUTPUT_NAME),
        output_kms_key=ctx.settings.kms_key_id,
        volume_kms_key=ctx.settings.kms_key_id,
        sagemaker_session=ctx.session,
        base_transform_job_name=f"{ctx.settings.pipeline_name}-batch",
    )
    step_args = transformer.transform(data=ctx.params[P.BATCH_INPUT_URI], data_type="S3Prefix", **requests)
    # Not cached: new objects under the same BatchInputUri would get the old predictions.
    return TransformStep(name, step_args=step_args)
