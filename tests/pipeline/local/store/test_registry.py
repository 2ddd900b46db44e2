"""The local model registry: versions per group, metrics, listing."""

from __future__ import annotations

from pipeline.local.store.registry import Registry


def register(registry, group, status="PendingManualApproval", accuracy=0.93):
    return registry.register(
        group=group, approval_status=status, model_data_url=f"s3://b/{group}/model.tar.gz",
        region="us-east-1", account="123456789012", created="2026-01-01T00:00:00+00:00",
        request={"ModelPackageGroupName": group}, metrics_uri="s3://b/eval/evaluation.json",
        metrics={"metrics": {"accuracy": {"value": accuracy}}}, execution_id="exec-1")


def test_versions_count_up_per_group(tmp_path):
    registry = Registry(tmp_path / "registry.sqlite")
    assert registry.list() == []
    first = register(registry, "models")
    second = register(registry, "models", status="Approved", accuracy=0.97)
    other = register(registry, "other")
    assert (first.version, second.version, other.version) == (1, 2, 1)
    assert second.arn == "arn:aws:sagemaker:us-east-1:123456789012:model-package/models/2"

    # A new Registry object (a later `trainpipe models`) reads the same rows.
    listed = Registry(tmp_path / "registry.sqlite").list("models")
    assert [(p.version, p.approval_status) for p in listed] == [(1, "PendingManualApproval"), (2, "Approved")]
    assert listed[1].metrics == {"metrics": {"accuracy": {"value": 0.97}}}
    assert listed[1].primary_metric() == "accuracy=0.97"
    assert [p.group for p in Registry(tmp_path / "registry.sqlite").list()] == ["models", "models", "other"]
