"""``get_pipeline()``: the only place that wires the DAG.

::

    PreprocessData ──> TrainModel ──> EvaluateModel ──> CheckAccuracy ─┬─ accuracy >= threshold ──> RegisterModel
    (Processing)       (Training,      (Processing,      (Condition,    │
     raw -> TFRecord    Horovod/MPI)    evaluation.json)  JsonGet)      └─ otherwise ──> AccuracyTooLow (Fail)
     shards+manifest

Everything the steps share is defined once elsewhere: parameter names in ``parameters.py``,
build-time settings in ``settings.py``, container paths and hyperparameter names in the
entrypoints' ``contract.py`` / ``report.py``, code locations in ``bundles.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sagemaker import image_uris
from sagemaker.inputs import TrainingInput
from sagemaker.model_metrics import MetricsSource, ModelMetrics
from sagemaker.network import NetworkConfig
from sagemaker.processing import ProcessingInput, ProcessingOutput, Processor
from sagemaker.tensorflow import TensorFlow, TensorFlowModel
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join, JsonGet
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString
from sagemaker.workflow.pipeline import Pipeline
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.retry import (
    SageMakerJobExceptionTypeEnum,
    SageMakerJobStepRetryPolicy,
    StepExceptionTypeEnum,
    StepRetryPolicy,
)
from sagemaker.workflow.steps import CacheConfig, ProcessingStep, TrainingStep

from evaluation import report
from pipeline import parameters as P
from pipeline.bundles import SOURCEDIR_ARCHIVE, all_bundles
from pipeline.default_data import DIGITS_RECORDS
from pipeline.session import OfflinePipelineSession
from pipeline.settings import (
    FRAMEWORK_VERSION,
    INFERENCE_FRAMEWORK_VERSION,
    INFERENCE_INSTANCE_TYPE,
    PY_VERSION,
    Settings,
)
from processing import contract as processing
from training_entry import contract as training

STEP_PREPROCESS = "PreprocessData"
STEP_TRAIN = "TrainModel"
STEP_EVALUATE = "EvaluateModel"
STEP_CONDITION = "CheckAccuracy"
STEP_REGISTER = "RegisterModel"  # ModelStep: the definition names it "RegisterModel-RegisterModel"
STEP_FAIL = "AccuracyTooLow"
STEP_ORDER = (STEP_PREPROCESS, STEP_TRAIN, STEP_EVALUATE, STEP_CONDITION, STEP_REGISTER, STEP_FAIL)

_SDK_PARAMETER = {str: ParameterString, int: ParameterInteger, float: ParameterFloat}


def _sdk_parameters(values: Mapping[str, object]) -> dict:
    return {
        spec.name: _SDK_PARAMETER[spec.type](name=spec.name, default_value=values[spec.name])
        for spec in P.SPECS
    }


def _image(settings: Settings, instance_type: str, scope: str = "training") -> str:
    return image_uris.retrieve(
        framework="tensorflow",
        region=settings.region,
        version=FRAMEWORK_VERSION if scope == "training" else INFERENCE_FRAMEWORK_VERSION,
        py_version=PY_VERSION if scope == "training" else None,
        instance_type=instance_type,
        image_scope=scope,
    )


def get_pipeline(
    settings: Settings | None = None,
    parameter_overrides: Mapping[str, object] | None = None,
    session: OfflinePipelineSession | None = None,
) -> Pipeline:
    """The SageMaker pipeline; ``parameter_overrides`` become the parameters' defaults."""
    settings = settings or Settings()
    values = P.resolve(
        parameter_overrides or {},
        bucket=settings.bucket,
        prefix=settings.prefix,
        default_data_records=DIGITS_RECORDS,
    )
    session = session or OfflinePipelineSession(settings.region, settings.bucket)
    params = _sdk_parameters(values)
    bundles = all_bundles()
    cache = (
        CacheConfig(enable_caching=True, expire_after=settings.step_cache_expiry)
        if settings.step_cache_expiry
        else None
    )
    # Build-time choice: SageMaker needs the image before any execution exists (README).
    training_image = _image(settings, values[P.TRAINING_INSTANCE_TYPE])
    processing_image = _image(settings, "ml.m5.xlarge")
    network = NetworkConfig(
        enable_network_isolation=settings.network_isolation,
        encrypt_inter_container_traffic=True,
    )

    def processor(instance_count, bundle_name: str) -> Processor:
        bundle = bundles[bundle_name]
        return Processor(
            image_uri=processing_image,
            role=settings.role_arn,
            instance_count=instance_count,
            instance_type=params[P.PROCESSING_INSTANCE_TYPE],
            # SageMaker: the bundle is copied to CODE_DIR; run its module from there.
            entrypoint=["python3", "-m", bundle.module],
            env={"PYTHONPATH": processing.CODE_DIR},
            volume_kms_key=settings.kms_key_id,
            output_kms_key=settings.kms_key_id,
            network_config=network,
            sagemaker_session=session,
            base_job_name=f"{settings.pipeline_name}-{bundle_name}",
        )

    def output_uri(step: str, name: str) -> Join:
        """Per execution, under the artifact prefix (the SDK's default would use the pipeline
        name as the prefix, outside what the execution role may write)."""
        return Join(
            on="/",
            values=[settings.s3_uri(), ExecutionVariables.PIPELINE_EXECUTION_ID, step, "output", name],
        )

    def code_input(bundle_name: str) -> ProcessingInput:
        return ProcessingInput(
            input_name="code",
            source=f"s3://{settings.bucket}/{bundles[bundle_name].key_prefix(settings.prefix)}/",
            destination=processing.CODE_DIR,
        )

    # --- PreprocessData ------------------------------------------------------------------
    preprocess_args = processor(params[P.PROCESSING_INSTANCE_COUNT], "processing").run(
        inputs=[
            code_input("processing"),
            ProcessingInput(
                input_name="raw", source=params[P.INPUT_DATA_URI], destination=processing.RAW_DATA_DIR
            ),
        ],
        outputs=[
            ProcessingOutput(
                output_name=name, source=path, destination=output_uri(STEP_PREPROCESS, name)
            )
            for name, path in processing.OUTPUT_DIRS.items()
        ],
        arguments=[
            processing.ARG_INSTANCE_COUNT, params[P.TRAINING_INSTANCE_COUNT].to_string(),
            processing.ARG_PROCESSES_PER_HOST, params[P.PROCESSES_PER_HOST].to_string(),
            processing.ARG_SEED, str(settings.seed),
        ],
    )
    step_preprocess = ProcessingStep(STEP_PREPROCESS, step_args=preprocess_args, cache_config=cache)
    split_uri = {
        name: step_preprocess.properties.ProcessingOutputConfig.Outputs[name].S3Output.S3Uri
        for name in processing.OUTPUT_DIRS
    }

    # --- TrainModel ------------------------------------------------------------------------
    training_bundle = bundles["training"]
    estimator = TensorFlow(
        entry_point=training.ENTRY_POINT,
        source_dir=(
            f"s3://{settings.bucket}/{training_bundle.key_prefix(settings.prefix)}/{SOURCEDIR_ARCHIVE}"
        ),
        image_uri=training_image,
        framework_version=FRAMEWORK_VERSION,
        py_version=PY_VERSION,
        role=settings.role_arn,
        instance_count=params[P.TRAINING_INSTANCE_COUNT],
        instance_type=params[P.TRAINING_INSTANCE_TYPE],
        # Horovod: SageMaker launches ProcessesPerHost ranks per host with mpirun.
        distribution={
            "mpi": {
                "enabled": True,
                "processes_per_host": params[P.PROCESSES_PER_HOST],
                "custom_mpi_options": settings.custom_mpi_options,
            }
        },
        hyperparameters={
            training.HP_EPOCHS: params[P.EPOCHS],
            training.HP_BATCH_SIZE: params[P.BATCH_SIZE],
            training.HP_BASE_LEARNING_RATE: params[P.BASE_LEARNING_RATE],
            training.HP_WARMUP_EPOCHS: params[P.WARMUP_EPOCHS],
            training.HP_SEED: settings.seed,
            training.HP_MIXED_PRECISION: settings.mixed_precision,
            training.HP_FP16_ALLREDUCE: settings.fp16_allreduce,
        },
        metric_definitions=training.METRIC_DEFINITIONS,
        output_path=settings.s3_uri("training"),
        # Per execution: a retried job resumes; a new execution does not inherit old epochs.
        checkpoint_s3_uri=Join(
            on="/",
            values=[settings.s3_uri("checkpoints"), ExecutionVariables.PIPELINE_EXECUTION_ID],
        ),
        checkpoint_local_path=training.CHECKPOINT_DIR,
        enable_network_isolation=settings.network_isolation,
        encrypt_inter_container_traffic=True,
        volume_kms_key=settings.kms_key_id,
        output_kms_key=settings.kms_key_id,
        use_spot_instances=settings.use_spot,
        max_run=settings.max_run_seconds,
        max_wait=settings.max_run_seconds * 2 if settings.use_spot else None,
        disable_profiler=True,
        debugger_hook_config=False,
        sagemaker_session=session,
        base_job_name=f"{settings.pipeline_name}-training",
    )
    channels = {
        name: TrainingInput(
            split_uri[name],
            distribution=params[P.TRAIN_DISTRIBUTION],
            input_mode=params[P.TRAIN_INPUT_MODE],
        )
        for name in training.DATA_CHANNELS
    }
    # Every rank reads every shard's record count, to agree on steps per epoch.
    channels[training.CHANNEL_MANIFEST] = TrainingInput(
        split_uri[processing.OUTPUT_MANIFEST], distribution="FullyReplicated", input_mode="File"
    )
    if settings.init_model_uri:
        channels[training.CHANNEL_INIT] = TrainingInput(
            settings.init_model_uri, distribution="FullyReplicated", input_mode="File"
        )
    step_train = TrainingStep(
        STEP_TRAIN,
        step_args=estimator.fit(inputs=channels),
        cache_config=cache,
        retry_policies=[
            # Transient: capacity, throttling, service faults. A retried job resumes from the
            # execution's checkpoints (see checkpoint_s3_uri).
            StepRetryPolicy(
                exception_types=[StepExceptionTypeEnum.SERVICE_FAULT, StepExceptionTypeEnum.THROTTLING],
                interval_seconds=30, backoff_rate=2.0, max_attempts=3,
            ),
            SageMakerJobStepRetryPolicy(
                exception_types=[
                    SageMakerJobExceptionTypeEnum.CAPACITY_ERROR,
                    SageMakerJobExceptionTypeEnum.INTERNAL_ERROR,
                    SageMakerJobExceptionTypeEnum.RESOURCE_LIMIT,
                ],
                interval_seconds=60, backoff_rate=2.0, max_attempts=3,
            ),
        ],
    )
    model_artifact = step_train.properties.ModelArtifacts.S3ModelArtifacts

    # --- EvaluateModel -----------------------------------------------------------------------
    evaluation_report = PropertyFile(
        name=report.PROPERTY_FILE_NAME, output_name=report.OUTPUT_NAME, path=report.REPORT_FILE
    )
    evaluate_args = processor(1, "evaluation").run(
        inputs=[
            code_input("evaluation"),
            ProcessingInput(input_name="model", source=model_artifact, destination=report.MODEL_INPUT_DIR),
            ProcessingInput(input_name="test", source=split_uri["test"], destination=report.TEST_INPUT_DIR),
        ],
        outputs=[
            ProcessingOutput(
                output_name=report.OUTPUT_NAME,
                source=report.OUTPUT_DIR,
                destination=output_uri(STEP_EVALUATE, report.OUTPUT_NAME),
            )
        ],
    )
    step_evaluate = ProcessingStep(
        STEP_EVALUATE, step_args=evaluate_args, property_files=[evaluation_report], cache_config=cache
    )
    evaluation_uri = Join(
        on="/",
        values=[
            step_evaluate.properties.ProcessingOutputConfig.Outputs[report.OUTPUT_NAME].S3Output.S3Uri,
            report.REPORT_FILE,
        ],
    )

    # --- CheckAccuracy -> RegisterModel | AccuracyTooLow -----------------------------------------
    accuracy = JsonGet(
        step_name=STEP_EVALUATE, property_file=evaluation_report, json_path=report.ACCURACY_JSON_PATH
    )
    model = TensorFlowModel(
        model_data=model_artifact,
        role=settings.role_arn,
        framework_version=INFERENCE_FRAMEWORK_VERSION,
        image_uri=_image(settings, INFERENCE_INSTANCE_TYPE, scope="inference"),
        sagemaker_session=session,
    )
    register_args = model.register(
        content_types=["application/json"],
        response_types=["application/json"],
        inference_instances=[INFERENCE_INSTANCE_TYPE],
        transform_instances=[INFERENCE_INSTANCE_TYPE],
        model_package_group_name=settings.model_package_group,
        approval_status=params[P.MODEL_APPROVAL_STATUS],
        model_metrics=ModelMetrics(
            model_statistics=MetricsSource(s3_uri=evaluation_uri, content_type="application/json")
        ),
    )
    step_register = ModelStep(STEP_REGISTER, step_args=register_args)
    step_fail = FailStep(
        STEP_FAIL,
        error_message=Join(
            on="",
            values=[
                "Test accuracy ", accuracy, " is below ", P.ACCURACY_THRESHOLD, "=",
                params[P.ACCURACY_THRESHOLD], "; the model was not registered.",
            ],
        ),
    )
    step_condition = ConditionStep(
        STEP_CONDITION,
        conditions=[ConditionGreaterThanOrEqualTo(left=accuracy, right=params[P.ACCURACY_THRESHOLD])],
        if_steps=[step_register],
        else_steps=[step_fail],
    )
    return Pipeline(
        name=settings.pipeline_name,
        parameters=list(params.values()),
        steps=[step_preprocess, step_train, step_evaluate, step_condition],
        sagemaker_session=session,
    )


def build_definition(
    settings: Settings | None = None, parameter_overrides: Mapping[str, object] | None = None
) -> dict:
    """The definition as a dict (what ``trainpipe definition`` prints and the runner reads)."""
    return json.loads(get_pipeline(settings, parameter_overrides).definition())
