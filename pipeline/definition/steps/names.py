"""Step names: the one definition (``pipeline.definition.build`` re-exports them)."""

from __future__ import annotations

STEP_PREPROCESS = "PreprocessData"
STEP_TRAIN = "TrainModel"
STEP_TUNE = "TuneModel"  # in TrainModel's place with --tune N (steps/tune.py)
STEP_EVALUATE = "EvaluateModel"
STEP_CONDITION = "CheckAccuracy"
STEP_REGISTER = "RegisterModel"  # ModelStep: the definition names it "RegisterModel-RegisterModel"
STEP_FAIL = "AccuracyTooLow"
# Batch inference, after registration (steps/batch.py): only when BatchInputUri is not empty.
STEP_BATCH_CONDITION = "CheckBatchInput"
STEP_BATCH_MODEL = "BatchModel"  # ModelStep: the definition names it "BatchModel-CreateModel"
STEP_BATCH_KIND = "CheckBatchDataKind"  # images and tables reach the model in different forms
STEP_TRANSFORM_IMAGES = "BatchTransformImages"
STEP_TRANSFORM_TABLE = "BatchTransformTable"
STEP_ORDER = (STEP_PREPROCESS, STEP_TRAIN, STEP_TUNE, STEP_EVALUATE, STEP_CONDITION, STEP_REGISTER, STEP_FAIL,
              STEP_BATCH_CONDITION, STEP_BATCH_MODEL, STEP_BATCH_KIND, STEP_TRANSFORM_IMAGES,
              STEP_TRANSFORM_TABLE)

# The definition's Metadata entry naming the pipeline it was built for: `run --local --definition`
# on a saved `trainpipe definition` runs as that pipeline (its cache, MLflow experiment, registry
# group), not one named after the file.
METADATA_PIPELINE_NAME = "PipelineName"


def written_pipeline_name(definition: object) -> str | None:
    """The pipeline name a definition file carries (METADATA_PIPELINE_NAME), or None."""
    metadata = definition.get("Metadata") if isinstance(definition, dict) else None
    name = metadata.get(METADATA_PIPELINE_NAME) if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else None
