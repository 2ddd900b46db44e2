"""The runner's RegisterModel step: a model package in the local registry (``store/registry.py``),
or the one an earlier execution registered for the same model artifact."""

from __future__ import annotations

import json

from pipeline.local.dag import interpreter
from pipeline.local.dag.interpreter import ExpressionError, StepNode
from pipeline.local.execution import SUCCEEDED, StepRecord, timestamp
from pipeline.local.store.storage import StorageError


def register(runner, node: StepNode, record: StepRecord) -> None:
    """The step's model package in the local registry; its properties are what SageMaker's
    DescribeModelPackage gives a later step."""
    args = interpreter.evaluate(node.body.get("Arguments", {}), runner.ctx)
    containers = (args.get("InferenceSpecification") or {}).get("Containers") or []
    if not containers or not containers[0].get("ModelDataUrl"):
        raise ExpressionError("RegisterModel: InferenceSpecification.Containers[0].ModelDataUrl is missing")
    model_url = containers[0]["ModelDataUrl"]
    if not runner.storage.exists(model_url):
        raise ExpressionError(f"RegisterModel: model artifact {model_url} does not exist")
    statistics = ((args.get("ModelMetrics") or {}).get("ModelQuality") or {}).get("Statistics") or {}
    metrics_uri = statistics.get("S3Uri")
    metrics = None
    if metrics_uri:
        try:
            metrics = json.loads(runner.storage.read_bytes(metrics_uri))
        except (StorageError, ValueError) as error:
            raise ExpressionError(f"RegisterModel: model metrics {metrics_uri}: {error}") from error
    group = args.get("ModelPackageGroupName")
    if not group:
        raise ExpressionError("RegisterModel: ModelPackageGroupName is missing")
    # A training step served from the cache hands on the model an earlier execution
    # registered: the same artifact is the same model, not a new version (--no-cache
    # trains a new model, and so registers one).
    same = [p for p in runner.registry.list(group) if p.model_data_url == model_url]
    package = same[-1] if same else runner.registry.register(
        group=group, approval_status=args.get("ModelApprovalStatus", "PendingManualApproval"),
        model_data_url=model_url, region=runner.options.region, account=runner.account,
        created=timestamp(), request=args, metrics_uri=metrics_uri, metrics=metrics,
        execution_id=runner.execution_id)
    record.properties = {
        "ModelPackageArn": package.arn,
        "ModelPackageGroupName": package.group,
        "ModelPackageVersion": package.version,
        "ModelApprovalStatus": package.approval_status,
        "ModelPackageStatus": "Completed",
        "CreationTime": package.created,
    }
    record.detail = f"{package.group} v{package.version} ({package.approval_status})" + (
        f" {package.primary_metric()}" if package.primary_metric() else "") + (
        f", registered by {package.execution_id}: the same model (--no-cache trains a new one)"
        if same else "")
    record.status = SUCCEEDED

