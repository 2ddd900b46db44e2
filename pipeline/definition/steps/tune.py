"""TuneModel (Tuning), with ``--tune N``: TrainModel's estimator under a ``HyperparameterTuner``
of N trials, which maximises the validation accuracy over

- the base learning rate (log scale: its useful values span orders of magnitude),
- the batch size per worker (log scale: 16 to 256), and
- the warm-up epochs (0 to 3),

the rest of TrainModel's hyperparameters static. Bayesian search (SageMaker's default) and
early stopping Auto (a trial that trails the earlier ones at the same epoch stops) unless
``--tune-strategy`` / ``--tune-early-stopping`` say otherwise. The evaluation and
the registration take the best trial's model (``get_top_model_s3_uri``), so the gate and the
registry see the tuned model exactly as they would a trained one.

Trials do not checkpoint: they would resume from each other's epochs in the execution's one
checkpoint prefix.
"""

from __future__ import annotations

from sagemaker.tuner import ContinuousParameter, HyperparameterTuner, IntegerParameter
from sagemaker.workflow.steps import ProcessingStep, TuningStep

from pipeline.definition import parameters as P
from pipeline.definition.steps.context import BuildContext
from pipeline.definition.steps.names import STEP_TUNE
from pipeline.definition.steps.train import _channels, _estimator, _retry_policies
from training_entry import contract as training

# SageMaker's objective: the name of the metric definition that reads the validation accuracy.
OBJECTIVE_METRIC = "val_accuracy"
# Each tuned pipeline parameter's range (P.TUNED_PARAMETERS names the hyperparameter it feeds).
# The local runner clips the batch size's range to the data (local/jobs/tuning/data_fit.py).
TUNED = {
    P.BASE_LEARNING_RATE: ContinuousParameter(1e-4, 1e-1, scaling_type="Logarithmic"),
    P.BATCH_SIZE: IntegerParameter(16, 256, scaling_type="Logarithmic"),
    P.WARMUP_EPOCHS: IntegerParameter(0, 3, scaling_type="Linear"),
}
RANGES = {P.TUNED_PARAMETERS[parameter]: tuned for parameter, tuned in TUNED.items()}


def tuner(ctx: BuildContext) -> HyperparameterTuner:
    settings = ctx.settings
    return HyperparameterTuner(
        _estimator(ctx, checkpoints=False),
        objective_metric_name=OBJECTIVE_METRIC,
        objective_type="Maximize",
        hyperparameter_ranges=RANGES,
        metric_definitions=training.METRIC_DEFINITIONS,
        strategy=settings.tune_strategy,
        max_jobs=settings.tune_jobs,
        # An explicit --tune-parallel above --tune is refused (cli/options.py); the default's 2
        # is lowered for --tune 1.
        max_parallel_jobs=min(settings.tune_parallel_jobs, settings.tune_jobs),
        early_stopping_type=settings.tune_early_stopping,
        random_seed=settings.seed,
        base_tuning_job_name=f"{settings.pipeline_name}-tune"[:20],
    )


class _TuningStep(TuningStep):
    """SDK v2's TuningStep, without the build's timestamp in the static hyperparameters
    (``sagemaker_job_name``), as TrainingStep drops it: the same build is the same request, so
    the step's cache key holds from one build to the next (caching.py: StaticHyperParameters
    is part of it)."""

    @property
    def arguments(self):
        request = super().arguments
        request.get("TrainingJobDefinition", {}).get("StaticHyperParameters", {}).pop("sagemaker_job_name", None)
        return request


def tune_step(ctx: BuildContext, step_preprocess: ProcessingStep) -> TuningStep:
    step = _TuningStep(
        STEP_TUNE,
        step_args=tuner(ctx).fit(inputs=_channels(ctx, step_preprocess)),
        cache_config=ctx.cache,
        retry_policies=_retry_policies(),
    )
    # The best trial's model.tar.gz: <S3OutputPath>/<its job name>/output/model.tar.gz, read
    # by steps/train.py's model_artifact for the evaluation, the registration and batch.
    bucket, _, prefix = ctx.settings.s3_uri("training")[len("s3://"):].partition("/")
    step.top_model = step.get_top_model_s3_uri(top_k=0, s3_bucket=bucket, prefix=prefix)
    return step
