"""pipeline/notebook.py: the DAG picture and the training curves the notebook shows."""

from __future__ import annotations

import json
import time

import pytest

from evaluation.report import OUTPUT_NAME, REPORT_FILE, build_report
from pipeline.definition.build import (
    STEP_BATCH_CONDITION,
    STEP_BATCH_KIND,
    STEP_BATCH_MODEL,
    STEP_CONDITION,
    STEP_EVALUATE,
    STEP_FAIL,
    STEP_PREPROCESS,
    STEP_TRAIN,
    STEP_TRANSFORM_IMAGES,
    STEP_TRANSFORM_TABLE,
    build_definition,
)
from pipeline.notebook import (
    TRAINING_LOG_GROUP,
    cloud_results,
    dag_edges,
    dag_picture,
    latest_cloud_results,
    latest_local_execution,
    local_results,
    plot_training_curves,
    reduced_edges,
    training_curves,
    training_log,
    workdir,
)
from tests.moto_aws import MOTO_CFN_WARNING, aws, deploy_stack, moto_url  # noqa: F401
from training_entry.contract import format_metric_line


@pytest.fixture(scope="module")
def definition() -> dict:
    return build_definition()


def test_the_dag_is_the_pipeline_order_with_labelled_branches(definition):
    steps, edges = dag_edges(definition)
    register = next(s["Name"] for s in steps if s["Type"] == "RegisterModel")
    batch_model = f"{STEP_BATCH_MODEL}-CreateModel"
    assert sorted(reduced_edges(edges)) == sorted([
        (STEP_PREPROCESS, STEP_TRAIN, ""),
        (STEP_TRAIN, STEP_EVALUATE, ""),
        (STEP_EVALUATE, STEP_CONDITION, ""),
        (STEP_CONDITION, register, "if"),
        (STEP_CONDITION, STEP_FAIL, "else"),
        # Batch inference: after the registration, in the gate's if-branch, then by data kind.
        (STEP_CONDITION, STEP_BATCH_CONDITION, "if"),
        (register, STEP_BATCH_CONDITION, ""),
        (STEP_BATCH_CONDITION, batch_model, "if"),
        (STEP_BATCH_CONDITION, STEP_BATCH_KIND, "if"),
        (STEP_BATCH_KIND, STEP_TRANSFORM_IMAGES, "if"),
        (STEP_BATCH_KIND, STEP_TRANSFORM_TABLE, "else"),
        (batch_model, STEP_TRANSFORM_IMAGES, ""),
        (batch_model, STEP_TRANSFORM_TABLE, ""),
    ])
    # The full edge list keeps the data references the picture leaves out.
    assert (STEP_PREPROCESS, STEP_EVALUATE, "") in edges  # the test split
    assert (STEP_TRAIN, register, "") in edges  # the model artifact


def test_reduction_keeps_only_edges_no_longer_path_implies():
    edges = [("a", "b", ""), ("b", "c", ""), ("a", "c", ""), ("c", "d", "if"), ("a", "d", "")]
    assert reduced_edges(edges) == [("a", "b", ""), ("b", "c", ""), ("c", "d", "if")]


def test_depends_on_is_an_edge():
    definition = {"Steps": [{"Name": "x", "Type": "Processing", "Arguments": {}},
                            {"Name": "y", "Type": "Processing", "Arguments": {}, "DependsOn": ["x"]}]}
    assert dag_edges(definition)[1] == [("x", "y", "")]


def test_pictures(definition):
    png = dag_picture(definition)
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    svg = dag_picture(definition, format="svg").decode()
    steps, _ = dag_edges(definition)
    for step in steps:
        assert f">{step['Name']}<" in svg, step["Name"]


def metric_lines(epochs: int) -> list[str]:
    lines = ["[algo-1 rank 0] starting", "[algo-2 rank 1] unrelated line with loss=9"]
    for epoch in range(epochs):
        metrics = {"loss": 1.0 / (epoch + 1), "accuracy": 0.5 + epoch / 10,
                   "val_loss": 1.2 / (epoch + 1), "val_accuracy": 0.45 + epoch / 10, "throughput": 900.0}
        lines.append(f"[algo-1 rank 0] {format_metric_line(epoch, metrics)}")
    return lines


def test_training_curves_from_the_metric_lines():
    curves = training_curves(metric_lines(3))
    assert set(curves) == {"loss", "accuracy", "val_loss", "val_accuracy", "throughput"}
    assert curves["loss"] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3, rel=1e-5))]
    # A resumed job prints an epoch again: the last value counts.
    again = training_curves([*metric_lines(2), "[algo-1 rank 0] " + format_metric_line(1, {"loss": 0.25})])
    assert again["loss"] == [(0, 1.0), (1, 0.25)]


def test_plot_from_a_local_execution_folder(tmp_path):
    job_dir = tmp_path / "jobs" / "train"
    job_dir.mkdir(parents=True)
    (job_dir / "job.log").write_text("\n".join(metric_lines(4)) + "\n")
    (tmp_path / "execution.json").write_text(json.dumps({"steps": [
        {"name": STEP_PREPROCESS, "type": "Processing", "job_dir": str(tmp_path / "jobs" / "pre")},
        {"name": STEP_TRAIN, "type": "Training", "job_dir": str(job_dir)},
    ]}))
    assert training_log(tmp_path) == job_dir / "job.log"
    figure = plot_training_curves(tmp_path)
    loss_axes, accuracy_axes = figure.axes
    assert [line.get_label() for line in loss_axes.lines] == ["loss", "val_loss"]
    assert list(accuracy_axes.lines[0].get_xdata()) == [0, 1, 2, 3]


def test_plot_refuses_what_has_no_curves(tmp_path):
    with pytest.raises(FileNotFoundError, match="no execution.json"):
        plot_training_curves(tmp_path)
    with pytest.raises(ValueError, match="no per-epoch metric lines"):
        plot_training_curves(lines=["nothing here"])


# --- results -------------------------------------------------------------------------------------

REPORT = build_report(accuracy=0.93, loss=0.21, records=270, per_class={"0": {"support": 27, "correct": 26}})


def fake_local_run(workdir, status="Succeeded"):
    """The files `trainpipe run --local` leaves: execution.json, a job log, the evaluation
    report in the object store, a package in the registry."""
    from pipeline.local.store.registry import Registry

    uri = f"s3://bucket/prefix/exec-1/{STEP_EVALUATE}/output/{OUTPUT_NAME}"
    stored = workdir / "store" / "bucket" / "prefix" / "exec-1" / STEP_EVALUATE / "output" / OUTPUT_NAME
    stored.mkdir(parents=True)
    (stored / REPORT_FILE).write_text(json.dumps(REPORT))
    run = workdir / "runs" / "exec-1"
    job_dir = run / "jobs" / "train"
    job_dir.mkdir(parents=True)
    (job_dir / "job.log").write_text("\n".join(metric_lines(3)))
    (run / "execution.json").write_text(json.dumps({"status": status, "steps": [
        {"name": STEP_TRAIN, "type": "Training", "status": "Succeeded", "job_dir": str(job_dir),
         "duration_seconds": 9.0},
        {"name": STEP_EVALUATE, "type": "Processing", "status": "Succeeded", "job_dir": None,
         "properties": {"ProcessingOutputConfig": {"Outputs": [
             {"OutputName": OUTPUT_NAME, "S3Output": {"S3Uri": uri}}]}}},
    ]}))
    Registry(workdir / "registry.sqlite").register(
        group="trainpipe-models", approval_status="PendingManualApproval",
        model_data_url="s3://bucket/model.tar.gz", region="us-east-1", account="111122223333",
        created="2026-01-01T00:00:00+00:00", request={}, metrics=REPORT)
    return run


def test_local_results(tmp_path):
    run = fake_local_run(tmp_path)
    assert latest_local_execution(tmp_path) == run
    results = local_results(tmp_path)
    assert results.status == "Succeeded"
    assert results.evaluation == REPORT and results.accuracy == 0.93
    assert [m["version"] for m in results.models] == [1] and results.models[0]["accuracy"] == 0.93
    assert training_curves(results.training_log)["val_accuracy"][-1][0] == 2
    assert [s["step"] for s in results.steps] == [STEP_TRAIN, STEP_EVALUATE]


def test_the_notebooks_workdir_is_the_projects_and_says_so(tmp_path, monkeypatch, capsys):
    """Started in notebooks/, the notebook keeps its runs where `trainpipe models` looks from
    the repository root."""
    monkeypatch.delenv("TRAINPIPE_WORKDIR", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert workdir() == str(tmp_path / ".trainpipe")
    assert capsys.readouterr().out == (f"workdir: {tmp_path / '.trainpipe'} "
                                       "(from the project root, where pyproject.toml is)\n")
    assert workdir("here") == str(tmp_path / "notebooks" / "here")


def test_no_local_run_yet(tmp_path):
    with pytest.raises(FileNotFoundError, match="no local executions"):
        local_results(tmp_path)


@pytest.mark.usefixtures("aws")
def test_cloud_results():
    import boto3
    from botocore.stub import Stubber

    from pipeline.cloud.aws import Clients

    arn = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/trainpipe/execution/e1"
    training_job, evaluation_job = "pipelines-e1-TrainModel-abc", "pipelines-e1-EvaluateModel-def"
    # CloudWatch Logs and S3 in moto, as SageMaker would have left them.
    logs = boto3.client("logs", region_name="us-east-1")
    logs.create_log_group(logGroupName=TRAINING_LOG_GROUP)
    logs.create_log_stream(logGroupName=TRAINING_LOG_GROUP, logStreamName=f"{training_job}/algo-1-1")
    logs.put_log_events(logGroupName=TRAINING_LOG_GROUP, logStreamName=f"{training_job}/algo-1-1",
                        # (CloudWatch refuses events older than 14 days.)
                        logEvents=[{"timestamp": int(time.time() * 1000) + i, "message": line}
                                   for i, line in enumerate(metric_lines(3))])
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="artifacts")
    s3.put_object(Bucket="artifacts", Key=f"p/e1/{OUTPUT_NAME}/{REPORT_FILE}", Body=json.dumps(REPORT))
    # SageMaker's answers that moto lacks.
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(sagemaker)
    stubber.add_response("describe_pipeline_execution",
                         {"PipelineExecutionArn": arn, "PipelineExecutionStatus": "Succeeded"})
    stubber.add_response("list_pipeline_execution_steps", {"PipelineExecutionSteps": [
        {"StepName": STEP_TRAIN, "StepStatus": "Succeeded", "Metadata": {"TrainingJob": {
            "Arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{training_job}"}}},
        {"StepName": STEP_EVALUATE, "StepStatus": "Succeeded", "Metadata": {"ProcessingJob": {
            "Arn": f"arn:aws:sagemaker:us-east-1:123456789012:processing-job/{evaluation_job}"}}},
    ]})
    stubber.add_response("describe_processing_job", {
        "ProcessingJobName": evaluation_job, "ProcessingJobArn": "arn:x", "ProcessingJobStatus": "Completed",
        "CreationTime": "2026-01-01T00:00:00Z",
        "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge",
                                                  "VolumeSizeInGB": 30}},
        "AppSpecification": {"ImageUri": "image"},
        "ProcessingOutputConfig": {"Outputs": [{"OutputName": OUTPUT_NAME, "S3Output": {
            "S3Uri": f"s3://artifacts/p/e1/{OUTPUT_NAME}", "LocalPath": "/x", "S3UploadMode": "EndOfJob"}}]},
    }, {"ProcessingJobName": evaluation_job})
    stubber.add_response("list_model_packages", {"ModelPackageSummaryList": [{
        "ModelPackageGroupName": "trainpipe-models", "ModelPackageVersion": 4,
        "ModelPackageArn": "arn:aws:sagemaker:us-east-1:123456789012:model-package/trainpipe-models/4",
        "CreationTime": "2026-01-01T00:00:00Z", "ModelPackageStatus": "Completed",
        "ModelApprovalStatus": "PendingManualApproval"}]})
    clients = Clients("us-east-1")
    clients.set_client("sagemaker", sagemaker)
    with stubber:
        results = cloud_results(clients, arn, "trainpipe-models")
    assert results.status == "Succeeded"
    assert results.evaluation == REPORT and results.accuracy == 0.93
    assert training_curves(results.training_log)["loss"][0] == (0, 1.0)
    assert results.models[0]["version"] == 4
    assert [s["type"] for s in results.steps] == ["TrainingJob", "ProcessingJob"]


@pytest.mark.filterwarnings(MOTO_CFN_WARNING)
@pytest.mark.usefixtures("aws")
def test_latest_cloud_results_finds_the_newest_execution_through_the_stack(monkeypatch):
    import boto3

    stack = deploy_stack()
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    sagemaker.create_pipeline(PipelineName=stack["PipelineName"], RoleArn=stack["ExecutionRoleArn"],
                              PipelineDefinition=json.dumps({"Version": "2020-12-01", "Steps": []}))
    arns = [sagemaker.start_pipeline_execution(PipelineName=stack["PipelineName"])["PipelineExecutionArn"]
            for _ in range(2)]
    seen = {}
    monkeypatch.setattr("pipeline.notebook.cloud_results",
                        lambda clients, arn, group: seen.update(arn=arn, group=group) or "results")
    assert latest_cloud_results() == "results"
    assert seen == {"arn": arns[-1], "group": stack["ModelPackageGroupName"]}


# --- image runs: the confusion matrix and the misclassified images ---------------------------------

def image_report_and_files() -> tuple[dict, dict[str, bytes]]:
    from pipeline.data.png import encode_png

    files = {
        "misclassified/000.png": encode_png([bytes([40 * r + c for c in range(8)]) for r in range(6)], 8),
        "misclassified/001.png": encode_png([bytes([200, 10, 10] * 5)] * 5, 5, channels=3),
    }
    entries = [
        {"shard": "test-00000-of-00002.tfrecord", "record": 3, "label": 0, "predicted": 2, "confidence": 0.91,
         "file": "misclassified/000.png", "class_name": "cat", "predicted_class_name": "zebra finch"},
        {"shard": "test-00001-of-00002.tfrecord", "record": 0, "label": 1, "predicted": 0, "confidence": 0.55,
         "file": "misclassified/001.png", "class_name": "dog", "predicted_class_name": "cat"},
    ]
    document = build_report(
        accuracy=0.8, loss=0.5, records=10,
        per_class={str(i): {"support": 3 + (i == 0), "correct": 3 - (i < 2) + (i == 0)} for i in range(3)},
        kind="image", top_k=(2, 0.9), confusion_matrix=[[3, 0, 1], [1, 2, 0], [0, 0, 3]],
        class_names=["cat", "dog", "zebra finch"], misclassified=entries,
    )
    return document, files


def test_local_results_of_an_image_run_bring_the_misclassified_images(tmp_path, monkeypatch):
    document, files = image_report_and_files()
    monkeypatch.setitem(globals(), "REPORT", document)
    fake_local_run(tmp_path)
    stored = tmp_path / "store" / "bucket" / "prefix" / "exec-1" / STEP_EVALUATE / "output" / OUTPUT_NAME
    for relative, data in files.items():
        (stored / relative).parent.mkdir(parents=True, exist_ok=True)
        (stored / relative).write_bytes(data)
    results = local_results(tmp_path)
    assert [(entry["file"], data) for entry, data in results.misclassified] == list(files.items())


def test_a_tuned_runs_trials_plot_one_bar_each_and_its_curves_are_the_best_trials(tmp_path):
    """--tune: the objective per trial (stopped ones hatched, the best labelled), and the
    training curves of the best trial's log."""
    from pipeline.notebook import plot_tuning, tuning_trials

    def summary(name, value, status="Completed"):
        return {"TrainingJobName": name, "TrainingJobStatus": status, "TunedHyperParameters": {"batch-size": "32"},
                "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "val_accuracy", "Value": value}}

    best = summary("Tune-x-002-bb", 0.97)
    properties = {"BestTrainingJob": best,
                  "TrainingJobSummaries": [best, summary("Tune-x-001-aa", 0.9), summary("Tune-x-003-cc", 0.4, "Stopped")]}
    (tmp_path / "execution.json").write_text(json.dumps(
        {"status": "Succeeded", "steps": [{"name": "TuneModel", "type": "Tuning", "properties": properties}]}))
    log = tmp_path / "jobs" / "Tune-x-002-bb" / "job.log"
    log.parent.mkdir(parents=True)
    log.write_text("[algo-1 rank 0] " + format_metric_line(1, {"val_accuracy": 0.97}) + "\n")

    trials = tuning_trials(tmp_path)
    assert [(t["trial"], t["objective"], t["stopped_early"], t["best"]) for t in trials] == [
        ("Tune-x-001-aa", 0.9, False, False), ("Tune-x-002-bb", 0.97, False, True), ("Tune-x-003-cc", 0.4, True, False)]
    (axes,) = plot_tuning(trials).axes
    assert [round(b.get_height(), 2) for b in axes.patches] == [0.9, 0.97, 0.4]
    assert [b.get_hatch() for b in axes.patches] == [None, None, "//"]
    assert axes.get_ylabel() == "val_accuracy" and [t.get_text() for t in axes.texts] == ["best"]
    assert training_log(tmp_path) == log
    with pytest.raises(ValueError, match="not tuned"):
        plot_tuning([])
