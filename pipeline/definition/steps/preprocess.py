"""PreprocessData (Processing): raw data -> TFRecord shards + manifest, one shard per rank."""

from __future__ import annotations

from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.steps import ProcessingStep

from pipeline.definition import parameters as P
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.names import STEP_PREPROCESS
from processing import contract as processing


def preprocess_step(ctx: BuildContext) -> ProcessingStep:
    params = ctx.params
    step_args = ctx.processor(params[P.PROCESSING_INSTANCE_COUNT], "processing", STEP_PREPROCESS).run(
        inputs=[
            ctx.code_input("processing"),
            ProcessingInput(
                input_name="raw", source=params[P.INPUT_DATA_URI], destination=processing.RAW_DATA_DIR
            ),
        ],
        outputs=[
            ProcessingOutput(
                output_name=name, source=path, destination=ctx.output_uri(STEP_PREPROCESS, name)
            )
            for name, path in processing.OUTPUT_DIRS.items()
        ],
        arguments=[
            processing.ARG_INSTANCE_COUNT, params[P.TRAINING_INSTANCE_COUNT].to_string(),
            processing.ARG_PROCESSES_PER_HOST, params[P.PROCESSES_PER_HOST].to_string(),
            processing.ARG_SEED, str(ctx.settings.seed),
            processing.ARG_LABEL_COLUMN, params[P.LABEL_COLUMN],
            # Image trees: stored at the training size unless ImageRecords=original.
            processing.ARG_IMAGE_SIZE, params[P.IMAGE_SIZE].to_string(),
            processing.ARG_IMAGE_RECORDS, params[P.IMAGE_RECORDS],
        ],
    )
    return ProcessingStep(STEP_PREPROCESS, step_args=step_args, cache_config=ctx.cache)


def split_uri(step_preprocess: ProcessingStep, name: str):
    """Where the preprocess step wrote output ``name`` (a split or the manifest)."""
    return step_preprocess.properties.ProcessingOutputConfig.Outputs[name].S3Output.S3Uri
