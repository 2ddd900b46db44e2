"""``get_pipeline()``: the only place that wires the DAG.

::

    PreprocessData ──> TrainModel ──> EvaluateModel ──> CheckAccuracy ─┬─ accuracy >= threshold ──> RegisterModel
    (Processing)       (Training,      (Processing,      (Condition,    │
     raw -> TFRecord    Horovod/MPI)    evaluation.json)  JsonGet)      │    └─> CheckBatchInput (when BatchInputUri is
     shards+manifest                                                    │        given: CreateModel, Transform; steps/batch.py)
                                                                        └─ otherwise ──> AccuracyTooLow (Fail)

Each step has its own builder in ``pipeline/definition/steps/``. Everything the steps share is defined
once elsewhere: step names in ``steps/names.py``, parameter names in ``parameters.py``,
build-time settings in ``settings.py``, container paths and hyperparameter names in the
entrypoints' ``contract.py`` / ``report.py``, code locations in ``bundles.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sagemaker.workflow.pipeline import Pipeline

from pipeline.definition.session import OfflinePipelineSession, sdk_blind_to_mlflow
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.evaluate import evaluate_step
from pipeline.definition.steps.gate import accuracy_gate
from pipeline.definition.steps.names import (
    METADATA_PIPELINE_NAME,
    STEP_BATCH_CONDITION,
    STEP_BATCH_KIND,
    STEP_BATCH_MODEL,
    STEP_CONDITION,
    STEP_EVALUATE,
    STEP_FAIL,
    STEP_ORDER,
    STEP_PREPROCESS,
    STEP_REGISTER,
    STEP_TRAIN,
    STEP_TRANSFORM_IMAGES,
    STEP_TRANSFORM_TABLE,
    STEP_TUNE,
)
from pipeline.definition.steps.preprocess import preprocess_step
from pipeline.definition.steps.train import train_step
from pipeline.definition.steps.tune import tune_step
from pipeline.settings import Settings

# Callers import the step names from here, the module that wires the steps.
__all__ = [
    "STEP_BATCH_CONDITION", "STEP_BATCH_KIND", "STEP_BATCH_MODEL", "STEP_CONDITION", "STEP_EVALUATE",
    "STEP_FAIL", "STEP_ORDER", "STEP_PREPROCESS", "STEP_REGISTER", "STEP_TRAIN",
    "STEP_TRANSFORM_IMAGES", "STEP_TRANSFORM_TABLE", "STEP_TUNE", "build_definition", "get_pipeline",
]


class _OfflinePipeline(Pipeline):
    """The SDK's Pipeline, building its definition with the SDK blind to MLFLOW_TRACKING_URI
    (``session.sdk_blind_to_mlflow``: the step arguments run the estimators' fit() here)."""

    def definition(self) -> str:
        with sdk_blind_to_mlflow():
            return super().definition()


def get_pipeline(
    settings: Settings | None = None,
    parameter_overrides: Mapping[str, object] | None = None,
    session: OfflinePipelineSession | None = None,
) -> Pipeline:
    """The SageMaker pipeline; ``parameter_overrides`` become the parameters' defaults."""
    ctx = BuildContext.create(settings, parameter_overrides, session)
    preprocess = preprocess_step(ctx)
    # --tune N: a TuningStep in TrainModel's place; the steps after it take its best model.
    train = tune_step(ctx, preprocess) if ctx.settings.tune_jobs else train_step(ctx, preprocess)
    evaluate = evaluate_step(ctx, preprocess, train)
    check_accuracy = accuracy_gate(ctx, train, evaluate)  # -> RegisterModel (+ batch) | AccuracyTooLow
    pipeline = _OfflinePipeline(
        name=ctx.settings.pipeline_name,
        parameters=list(ctx.params.values()),
        steps=[preprocess, train, evaluate, check_accuracy],
        sagemaker_session=ctx.session,
    )
    # The SDK emits Metadata (string values) and takes none: the name travels in the file.
    pipeline._metadata[METADATA_PIPELINE_NAME] = ctx.settings.pipeline_name
    return pipeline


def build_definition(
    settings: Settings | None = None, parameter_overrides: Mapping[str, object] | None = None
) -> dict:
    """The definition as a dict (what ``trainpipe definition`` prints and the runner reads)."""
    return json.loads(get_pipeline(settings, parameter_overrides).definition())
