"""What a local execution made, for the end of its summary: each model archive,
evaluation.json and batch-prediction folder by its s3:// URI and, where the store is on this
machine, the file or folder it is (so nobody has to ``find`` the store for them)."""

from __future__ import annotations

from collections.abc import Mapping

from evaluation.report import REPORT_FILE
from pipeline.local.execution import SUCCEEDED, ExecutionRecord
from pipeline.local.store.storage import Storage, join_uri

LABEL_WIDTH = 15  # lines up with the summary's "run directory: " lines


def made(record: ExecutionRecord, storage: Storage) -> list[tuple[str, str, str | None]]:
    """(what, s3:// URI, local path or None) for each artifact of the succeeded steps, in step order."""
    found = []
    for step in record.steps:
        if step.status != SUCCEEDED or not isinstance(step.properties, Mapping):
            continue
        properties = step.properties
        model = (properties.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        if model:
            found.append(("model", model, _file(storage, model)))
        for output in (properties.get("ProcessingOutputConfig") or {}).get("Outputs") or []:
            folder = (output.get("S3Output") or {}).get("S3Uri")
            report = join_uri(folder, REPORT_FILE) if folder else None
            if report and storage.exists(report):
                found.append(("evaluation", report, _file(storage, report)))
        predictions = (properties.get("TransformOutput") or {}).get("S3OutputPath")
        if predictions and properties.get("TransformJobStatus") == "Completed":
            folder = predictions.rstrip("/") + "/"
            found.append(("predictions", folder, _folder(storage, folder)))
    return found


def _file(storage: Storage, uri: str) -> str | None:
    path = storage.local_path(uri)
    return str(path) if path else None


def _folder(storage: Storage, uri: str) -> str | None:
    """The local folder of a prefix: the parent of its first object's file, less the object's
    folders below the prefix (a Transform keeps the input's sub-folders)."""
    prefix = uri
    objects = storage.list(prefix)
    path = storage.local_path(objects[0]) if objects else None
    if path is None:
        return None
    depth = objects[0][len(prefix):].count("/")
    folder = path.parent
    for _ in range(depth):
        folder = folder.parent
    return str(folder) + "/"


def lines(record: ExecutionRecord, storage: Storage) -> list[str]:
    """``model:         s3://...`` and the local path beneath it, for each artifact."""
    out = []
    for what, uri, path in made(record, storage):
        out.append(f"{what + ':':<{LABEL_WIDTH}}{uri}")
        if path:
            out.append(f"{'':<{LABEL_WIDTH}}{path}")
    return out
