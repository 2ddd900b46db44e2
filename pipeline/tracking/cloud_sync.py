"""``trainpipe track sync --execution-arn``: what of a SageMaker pipeline execution no job logs.

The jobs log their own runs from inside their containers (training_entry/tracking.py: the
training, preprocessing and evaluation steps), children of the execution's run. The condition
and registration steps are no jobs: this reads them from SageMaker and logs them the same way,
as the local runner logs them (pipeline/tracking/records.py's tags):

- the execution's run: found by its execution-id tag (the first job made it), else made here;
  ended FINISHED / FAILED / KILLED once the execution has;
- a Condition step: a child run with its outcome (ListPipelineExecutionSteps'
  ``Metadata.Condition.Outcome``);
- a RegisterModel step: a child run tagged with the model package (``Metadata.RegisterModel.Arn``,
  DescribeModelPackage: group, version, approval status) and a version of the registered model
  named as the group, whose source is the package's model data.

Nothing is logged twice: a step whose run exists (by its step tag under the execution's run)
is left as it is. The experiment is the pipeline's name, as the jobs' MLFLOW_EXPERIMENT_NAME.
"""

from __future__ import annotations

from datetime import datetime

from pipeline.cloud.aws import aws_errors
from pipeline.cloud.executions import TERMINAL, StepLister, describe_execution
from pipeline.errors import UserError
from pipeline.tracking import records as R
from pipeline.tracking.target import Target

STEP_STATUS = {"Succeeded": "FINISHED", "Failed": "FAILED", "Stopped": "KILLED", "Stopping": "KILLED"}
EXECUTION_STATUS = {"Succeeded": "FINISHED", "Failed": "FAILED", "Stopped": "KILLED",
                    "CompletedWithFailures": "FAILED"}


def region_of(arn: str) -> str:
    parts = arn.split(":")
    if len(parts) < 6 or parts[2] != "sagemaker" or "/execution/" not in parts[5]:
        raise UserError(f"--execution-arn {arn}: not a pipeline execution ARN "
                        f"(arn:aws:sagemaker:<region>:<account>:pipeline/<name>/execution/<id>); "
                        f"`trainpipe executions` lists them")
    return parts[3]


def _millis(value) -> int | None:
    return int(value.timestamp() * 1000) if isinstance(value, datetime) else None


def sync_cloud_execution(sagemaker, arn: str, target: Target, client) -> tuple[list[str], str | None]:
    """Log what ``target`` lacks of the execution; returns (what was logged, in words; why
    step details are missing, or None)."""
    described = describe_execution(sagemaker, arn)
    pipeline = _pipeline_name(sagemaker, described["PipelineArn"])
    execution_id = arn.rsplit("/", 1)[-1]  # ExecutionVariables.PIPELINE_EXECUTION_ID: the jobs' tag
    experiment = _experiment(client, target.experiment or pipeline)
    logged: list[str] = []
    parent = _parent(client, experiment, execution_id, pipeline, described, logged)
    lister = StepLister(sagemaker)
    for step in lister.steps(arn) or []:
        metadata = step.get("Metadata") or {}
        if not ({"Condition", "RegisterModel"} & set(metadata)) or step.get("StepStatus") not in STEP_STATUS:
            continue
        found = client.search_runs([experiment], filter_string=(
            f"tags.`{R.TAG_PARENT}` = '{parent.info.run_id}' and tags.`{R.TAG_STEP}` = '{step['StepName']}'"))
        if found:
            continue
        _log_step(client, sagemaker, experiment, parent.info.run_id, execution_id, pipeline, step)
        logged.append(f"step {step['StepName']}")
    status = described.get("PipelineExecutionStatus")
    if status in TERMINAL and parent.info.status == "RUNNING":
        client.set_terminated(parent.info.run_id, status=EXECUTION_STATUS[status],
                              end_time=_millis(described.get("LastModifiedTime")))
        logged.append("the execution's end")
    return logged, lister.unsupported_reason or lister.last_error


def _pipeline_name(sagemaker, pipeline_arn: str) -> str:
    """The pipeline's name as created (the jobs' experiment): its ARN holds it lowercased.
    DescribePipeline takes the name or the ARN; moto takes the name only, so the ARN's last
    part is tried where the ARN is refused."""
    from botocore.exceptions import ClientError

    try:
        return sagemaker.describe_pipeline(PipelineName=pipeline_arn)["PipelineName"]
    except ClientError:
        with aws_errors(f"describing the pipeline {pipeline_arn}"):
            return sagemaker.describe_pipeline(PipelineName=pipeline_arn.rsplit("/", 1)[-1])["PipelineName"]


def _experiment(client, name: str) -> str:
    found = client.get_experiment_by_name(name)
    return found.experiment_id if found else client.create_experiment(name, tags={R.TAG_PIPELINE: name})


def _parent(client, experiment: str, execution_id: str, pipeline: str, described: dict, logged: list[str]):
    tagged = client.search_runs([experiment], filter_string=f"tags.`{R.TAG_EXECUTION}` = '{execution_id}'")
    parents = [r for r in tagged if R.TAG_PARENT not in r.data.tags]
    if parents:
        return parents[0]
    logged.append("the execution's run")
    return client.create_run(experiment, start_time=_millis(described.get("CreationTime")), run_name=execution_id,
                             tags={R.TAG_EXECUTION: execution_id, R.TAG_PIPELINE: pipeline,
                                   R.TAG_RUN_NAME: execution_id, "sagemaker.pipeline_execution_arn":
                                   described["PipelineExecutionArn"]})


def _log_step(client, sagemaker, experiment: str, parent: str, execution_id: str, pipeline: str, step: dict) -> None:
    name, metadata = step["StepName"], step.get("Metadata") or {}
    tags = {R.TAG_PARENT: parent, R.TAG_EXECUTION: execution_id, R.TAG_PIPELINE: pipeline, R.TAG_STEP: name,
            R.TAG_RUN_NAME: name, R.TAG_STEP_TYPE: "Condition" if "Condition" in metadata else "RegisterModel"}
    if "Condition" in metadata:
        tags[R.TAG_OUTCOME] = str(metadata["Condition"].get("Outcome", "")).lower()
    if step.get("FailureReason"):
        tags[R.TAG_FAILURE] = step["FailureReason"][:R.TAG_VALUE_CHARS]
    package = None
    if "RegisterModel" in metadata:
        with aws_errors(f"describing the model package of step {name}"):
            package = sagemaker.describe_model_package(ModelPackageName=metadata["RegisterModel"]["Arn"])
        tags[R.TAG_MODEL_PACKAGE] = package["ModelPackageArn"]
    run = client.create_run(experiment, start_time=_millis(step.get("StartTime")), tags=tags, run_name=name)
    if package is not None:
        _register(client, package, run.info.run_id)
    client.set_terminated(run.info.run_id, status=STEP_STATUS[step["StepStatus"]], end_time=_millis(step.get("EndTime")))


def _register(client, package: dict, run_id: str) -> None:
    from mlflow.exceptions import MlflowException

    group = package["ModelPackageGroupName"]
    try:
        client.create_registered_model(group, tags={R.TAG_PIPELINE: "trainpipe"})
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    containers = (package.get("InferenceSpecification") or {}).get("Containers") or [{}]
    client.create_model_version(
        group, containers[0].get("ModelDataUrl") or package["ModelPackageArn"], run_id=run_id,
        tags={R.TAG_MODEL_PACKAGE: package["ModelPackageArn"],
              "sagemaker.model_package_version": str(package.get("ModelPackageVersion", "")),
              "sagemaker.model_approval_status": package.get("ModelApprovalStatus", "")},
        description=f"model package {package['ModelPackageArn']} ({package.get('ModelApprovalStatus', '')})")
