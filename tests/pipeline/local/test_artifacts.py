"""The end of a local run's summary: the model, evaluation.json and predictions by their
s3:// URIs, each with its file or folder on this machine (pipeline/local/artifacts.py)."""

from __future__ import annotations

from pipeline.local import artifacts
from pipeline.local.execution import FAILED, SUCCEEDED, ExecutionRecord, StepRecord
from pipeline.local.store.storage import LocalStorage

from .helpers import BUCKET

MODEL = f"s3://{BUCKET}/training/job/output/model.tar.gz"
REPORT_FOLDER = f"s3://{BUCKET}/p/exec/EvaluateModel/output/evaluation"
PREDICTIONS = f"s3://{BUCKET}/p/exec/BatchTransformTable/output/predictions"


def record(*steps: StepRecord) -> ExecutionRecord:
    return ExecutionRecord("exec", "trainpipe", "/tmp/run", {}, steps=list(steps))


def steps(status: str = SUCCEEDED) -> list[StepRecord]:
    return [
        StepRecord("TrainModel", "Training", status, properties={"ModelArtifacts": {"S3ModelArtifacts": MODEL}}),
        StepRecord("EvaluateModel", "Processing", status, properties={"ProcessingOutputConfig": {"Outputs": [
            {"OutputName": "evaluation", "S3Output": {"S3Uri": REPORT_FOLDER}}]}}),
        StepRecord("BatchTransformTable", "Transform", status, properties={
            "TransformJobStatus": "Completed", "TransformOutput": {"S3OutputPath": PREDICTIONS}}),
    ]


def test_each_artifact_is_its_uri_with_the_local_file_beneath(tmp_path):
    store = LocalStorage(tmp_path / "store")
    store.put_bytes(b"model", MODEL)
    store.put_bytes(b"{}", f"{REPORT_FOLDER}/evaluation.json")
    store.put_bytes(b"{}\n", f"{PREDICTIONS}/sub/c.csv.out")  # the input's sub-folders are kept
    root = tmp_path / "store" / BUCKET
    assert artifacts.lines(record(*steps()), store) == [
        f"model:         {MODEL}",
        f"               {root}/training/job/output/model.tar.gz",
        f"evaluation:    {REPORT_FOLDER}/evaluation.json",
        f"               {root}/p/exec/EvaluateModel/output/evaluation/evaluation.json",
        f"predictions:   {PREDICTIONS}/",
        f"               {root}/p/exec/BatchTransformTable/output/predictions/",
    ]


def test_failed_steps_and_outputs_without_a_report_are_left_out(tmp_path):
    store = LocalStorage(tmp_path / "store")
    store.put_bytes(b"model", MODEL)
    assert artifacts.made(record(*steps(FAILED)), store) == []
    # A processing job that wrote no evaluation.json (PreprocessData) names none.
    assert [what for what, _, _ in artifacts.made(record(*steps()), store)] == ["model", "predictions"]


class RemoteStore(LocalStorage):
    """A store that is not on this machine (boto3 against S3): URIs only."""

    def local_path(self, uri):
        return None


def test_a_store_elsewhere_gives_the_uris_alone(tmp_path):
    store = RemoteStore(tmp_path / "store")
    store.put_bytes(b"model", MODEL)
    assert artifacts.lines(record(steps()[0]), store) == [f"model:         {MODEL}"]
