"""What every step builder shares: settings, parameters, session, code bundles, cache, images.

Images are a build-time choice: SageMaker needs the image before any execution exists
(README), so the training image follows the build-time ``TrainingInstanceType`` and the
processing image the build-time ``ProcessingInstanceType`` (GPU or CPU image). The training
step runs on trainpipe's own image (``training_image.py``); the others on AWS's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sagemaker import image_uris
from sagemaker.network import NetworkConfig
from sagemaker.processing import ProcessingInput, Processor
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.functions import Join
from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString
from sagemaker.workflow.steps import CacheConfig

from pipeline.data.default import DIGITS_RECORDS
from pipeline.definition import parameters as P
from pipeline.definition.bundles import Bundle, all_bundles
from pipeline.definition.session import OfflinePipelineSession
from pipeline.definition.training_image import TrainingImage, base_image
from pipeline.settings import (
    FRAMEWORK_VERSION,
    INFERENCE_FRAMEWORK_VERSION,
    PLACEHOLDER_ACCOUNT,
    PLACEHOLDER_TRAINING_REPOSITORY,
    PY_VERSION,
    Settings,
)
from processing import contract as processing
from training_entry.contract import FRAMEWORK_PYTORCH

_SDK_PARAMETER = {str: ParameterString, int: ParameterInteger, float: ParameterFloat}


def image(settings: Settings, instance_type: str, scope: str = "training") -> str:
    """AWS's TensorFlow image for ``instance_type``: the training image for processing and
    evaluation jobs, the inference image for batch transform."""
    if scope == "training":
        return base_image(settings.region, instance_type, FRAMEWORK_VERSION, PY_VERSION)
    return image_uris.retrieve(framework="tensorflow", region=settings.region,
                               version=INFERENCE_FRAMEWORK_VERSION, instance_type=instance_type,
                               image_scope=scope)


def training_image(settings: Settings, instance_type: str) -> TrainingImage:
    """The training step's image: trainpipe's own (AWS's plus Horovod, which train.py imports
    and AWS's TF 2.14 images lack), in the stack's repository."""
    repository = settings.training_image_repository or (
        f"{PLACEHOLDER_ACCOUNT}.dkr.ecr.{settings.region}.amazonaws.com/{PLACEHOLDER_TRAINING_REPOSITORY}")
    return TrainingImage(image(settings, instance_type), repository)


@dataclass(frozen=True)
class BuildContext:
    settings: Settings
    values: Mapping[str, object]  # resolved parameter defaults
    params: dict  # parameter name -> SDK pipeline parameter
    session: OfflinePipelineSession
    bundles: Mapping[str, Bundle]
    cache: CacheConfig | None
    processing_image: str

    @classmethod
    def create(
        cls,
        settings: Settings | None = None,
        parameter_overrides: Mapping[str, object] | None = None,
        session: OfflinePipelineSession | None = None,
    ) -> BuildContext:
        settings = settings or Settings()
        values = P.resolve(
            parameter_overrides or {},
            bucket=settings.bucket,
            prefix=settings.prefix,
            default_data_records=DIGITS_RECORDS,
        )
        return cls(
            settings=settings,
            values=values,
            params={
                spec.name: _SDK_PARAMETER[spec.type](name=spec.name, default_value=values[spec.name])
                for spec in P.pipeline_specs(values[P.FRAMEWORK])
            },
            session=session or OfflinePipelineSession(settings.region, settings.bucket),
            bundles=all_bundles(settings.model_file, settings.tracking_uri, values[P.FRAMEWORK]),
            cache=(
                CacheConfig(enable_caching=True, expire_after=settings.step_cache_expiry)
                if settings.step_cache_expiry
                else None
            ),
            processing_image=image(settings, values[P.PROCESSING_INSTANCE_TYPE]),
        )

    @property
    def pytorch(self) -> bool:
        """-p Framework=pytorch: the PyTorch room trains and evaluates (a build-time choice)."""
        return self.values[P.FRAMEWORK] == FRAMEWORK_PYTORCH

    def image(self, instance_type: str, scope: str = "training") -> str:
        return image(self.settings, instance_type, scope)

    def training_image(self, instance_type: str) -> str:
        return training_image(self.settings, instance_type).uri

    def network(self) -> NetworkConfig:
        return NetworkConfig(
            enable_network_isolation=self.settings.network_isolation,
            encrypt_inter_container_traffic=True,
        )

    def processor(self, instance_count, bundle_name: str, step: str, image_uri: str | None = None) -> Processor:
        """``image_uri``: another image than the processing one (PyTorch's evaluation)."""
        bundle = self.bundles[bundle_name]
        return Processor(
            image_uri=image_uri or self.processing_image,
            role=self.settings.role_arn,
            instance_count=instance_count,
            instance_type=self.params[P.PROCESSING_INSTANCE_TYPE],
            # SageMaker: the bundle is copied to CODE_DIR; run its module from there.
            entrypoint=["python3", "-m", bundle.module],
            env={"PYTHONPATH": processing.CODE_DIR, **self.tracking_environment(step)},
            volume_kms_key=self.settings.kms_key_id,
            output_kms_key=self.settings.kms_key_id,
            network_config=self.network(),
            sagemaker_session=self.session,
            base_job_name=f"{self.settings.pipeline_name}-{bundle_name}",
        )

    def tracking_environment(self, step: str | None = None) -> dict:
        """MLflow (``--tracking-uri``): what a job needs to log its own run from SageMaker
        (pipeline/tracking/jobs.py); empty without it."""
        from pipeline.tracking import jobs as tracking

        settings = self.settings
        if not settings.tracking_uri:
            return {}
        tracking.check(settings.tracking_uri, settings.network_isolation)
        return tracking.environment(settings.tracking_uri, settings.pipeline_name,
                                    ExecutionVariables.PIPELINE_EXECUTION_ID, step)

    def training_job_settings(self) -> dict:
        """What every training estimator of ours sets alike (TensorFlow's and PyTorch's)."""
        settings = self.settings
        return dict(
            enable_network_isolation=settings.network_isolation,
            # MLflow: the job logs its own run (training_entry/tracking.py) where --tracking-uri says.
            environment=self.tracking_environment() or None,
            encrypt_inter_container_traffic=True,
            volume_kms_key=settings.kms_key_id,
            output_kms_key=settings.kms_key_id,
            use_spot_instances=settings.use_spot,
            max_run=settings.max_run_seconds,
            max_wait=settings.max_run_seconds * 2 if settings.use_spot else None,
            disable_profiler=True,
            debugger_hook_config=False,
            sagemaker_session=self.session,
            base_job_name=f"{settings.pipeline_name}-training",
        )

    def code_input(self, bundle_name: str) -> ProcessingInput:
        return ProcessingInput(
            input_name="code",
            source=f"s3://{self.settings.bucket}/{self.bundles[bundle_name].key_prefix(self.settings.prefix)}/",
            destination=processing.CODE_DIR,
        )

    def output_uri(self, step: str, name: str) -> Join:
        """Per execution, under the artifact prefix (the SDK's default would use the pipeline
        name as the prefix, outside what the execution role may write)."""
        return Join(
            on="/",
            values=[self.settings.s3_uri(), ExecutionVariables.PIPELINE_EXECUTION_ID, step, "output", name],
        )
