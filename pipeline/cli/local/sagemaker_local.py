"""``trainpipe run --sagemaker-local``: the same pipeline handed to SageMaker's own local mode
(the SDK's LocalPipelineSession, Docker containers), after checking that Docker can run it here.
``run --local`` is the runner trainpipe is built around; this path exists to compare with it."""

from __future__ import annotations

import shutil
import subprocess

from pipeline.cli.local.commands import EXIT_FAILED, place_code_and_data
from pipeline.errors import UserError
from pipeline.local.store.storage import Boto3Storage


def _succeeds(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def docker_problem() -> str | None:
    """Why SageMaker's local mode cannot run here, or None."""
    if shutil.which("docker") is None:
        return ("--sagemaker-local needs Docker, and `docker` is not on PATH; install Docker "
                "with the Compose plugin, or use --local, which needs neither")
    if not _succeeds(["docker", "compose", "version"]) and shutil.which("docker-compose") is None:
        return ("--sagemaker-local needs Docker Compose (`docker compose` or `docker-compose`), "
                "and neither works here; install the Compose plugin, or use --local")
    if not _succeeds(["docker", "info"]):
        return ("--sagemaker-local needs a running Docker daemon, and `docker info` fails; "
                "start Docker, or use --local, which needs none")
    return None


def sagemaker_local_session():
    """The SDK's LocalPipelineSession, its S3 clients and resource pipeline/aws_clients.py's
    (bounded; its SageMaker client is the SDK's in-process one, its runtime client talks to the
    local container)."""
    import boto3
    from sagemaker.workflow.pipeline_context import LocalPipelineSession

    from pipeline import aws_clients

    return LocalPipelineSession(boto_session=aws_clients.session(boto3.Session()))


def run_sagemaker_local(settings, overrides) -> int:
    problem = docker_problem()
    if problem:
        raise UserError(problem)
    from pipeline.definition import parameters as P
    from pipeline.definition.build import get_pipeline

    print("note: SageMaker's local mode turns Pipe into File, refuses ShardedByS3Key and "
          "checkpoints, and cannot run RegisterModel; `trainpipe run --local` keeps them all",
          flush=True)
    values = P.resolve(overrides, bucket=settings.bucket, prefix=settings.prefix)
    storage = Boto3Storage(region=settings.region)  # local mode reads code and data from S3
    place_code_and_data(storage, settings, values, lambda text: print(text, flush=True))
    session = sagemaker_local_session()
    pipeline = get_pipeline(settings, overrides, session=session)
    pipeline.upsert(role_arn=settings.role_arn)
    execution = pipeline.start()
    steps = execution.list_steps()
    for step in steps:
        print(f"{step.get('StepName')}: {step.get('StepStatus')} {step.get('FailureReason', '')}".rstrip())
    status = execution.describe().get("PipelineExecutionStatus")
    print(f"Execution {status}")
    return 0 if status == "Succeeded" else EXIT_FAILED
