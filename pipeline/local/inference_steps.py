"""The runner's Model (CreateModel) and Transform steps.

A Model step runs nothing: it checks that its container can be served here
(``dag/inference.py``) and offers ``ModelName`` and ``ModelArn`` (and its container) as its
properties. A Transform step finds that model among the run's Model steps by ``ModelName`` and
runs a ``jobs/transform.py`` job with it.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.local.dag import inference, interpreter
from pipeline.local.dag.interpreter import STEP_MODEL, STEP_TRANSFORM  # noqa: F401 (the runner's)
from pipeline.local.execution import FAILED, STOPPED, SUCCEEDED, StepRecord
from pipeline.local.jobs.lifecycle import ENVIRONMENTS, JobStopped, account_of, arn
from pipeline.local.jobs.transform import TransformJob

MODEL_NAME_LIMIT = 63  # SageMaker: a model's name


def create_model(runner, node, record: StepRecord) -> bool:
    arguments = interpreter.evaluate(node.body.get("Arguments", {}), runner.ctx)
    kind, why = inference.model_kind(arguments)
    if kind is None:
        record.status, record.failure_reason = FAILED, f"the local runner cannot serve this model: {why}"
        return False
    suffix = f"-{runner.execution_id}"
    name = f"{runner.pipeline_name}-{node.name}"[: MODEL_NAME_LIMIT - len(suffix)] + suffix
    (container,) = inference.containers(arguments)
    record.properties = {
        "ModelName": name,
        "ModelArn": arn(runner.options.region, _account(arguments), "model", name),
        "PrimaryContainer": container,
        "ExecutionRoleArn": arguments.get("ExecutionRoleArn"),
        "LocalServing": kind,  # which server (dag/inference.py); not a SageMaker property
    }
    record.detail = f"model {name} ({container.get('Image')}, {container.get('ModelDataUrl')}{_script(container)})"
    record.status = SUCCEEDED
    return True


def run_transform(runner, node, record: StepRecord, job_name: str) -> bool:
    request = interpreter.evaluate(node.body.get("Arguments", {}), runner.ctx)
    wanted = request.get("ModelName")
    models = [p for p in runner.ctx.properties.values()
              if isinstance(p, dict) and p.get("ModelName") == wanted and "LocalServing" in p]
    if not models:
        record.status = FAILED
        record.failure_reason = (f"ClientError: model {wanted!r} was not created by a Model step of this "
                                 "execution; the local runner serves only those")
        return False
    model = {**models[0]["PrimaryContainer"], "kind": models[0]["LocalServing"]}
    record.job_name = job_name
    record.job_dir = str(runner.run_dir / "jobs" / job_name)
    runner.record.save()
    echo = (lambda line: runner.say(f"    {line}")) if runner.options.echo else None
    job = TransformJob(request, job_name, runner.storage, Path(record.job_dir), model=model,
                       region=runner.options.region, account=_account(models[0]), echo=echo,
                       environments=runner.workdir / ENVIRONMENTS)
    try:
        result = job.run()
    except JobStopped as stopped:
        record.properties, record.status = stopped.result.description, STOPPED
        raise
    record.properties = result.description
    if result.status != "Completed":
        record.status, record.failure_reason = FAILED, result.failure_reason
        return False
    output = str(request.get("TransformOutput", {}).get("S3OutputPath"))
    written = runner.storage.list(output.rstrip("/") + "/")
    first = runner.storage.local_path(written[0]) if written else None
    record.detail = f"{len(written)} object(s) under {output}" + (f" ({first.parent})" if first else "")
    record.status = SUCCEEDED
    return True


def _script(container: dict) -> str:
    """A framework model's inference script and where it is, for the step's line."""
    environment = container.get("Environment") or {}
    program = environment.get(inference.PROGRAM_ENV) if isinstance(environment, dict) else None
    if not program:
        return ""
    return f"; script {program} from {environment.get(inference.SUBMIT_DIRECTORY_ENV) or 'the model/code'}"


def _account(arguments: dict) -> str:
    """The account of the model's role (CreateModel: ExecutionRoleArn), for its ARN."""
    return account_of({"RoleArn": arguments.get("ExecutionRoleArn", "")})
