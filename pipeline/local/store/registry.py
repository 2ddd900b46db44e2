"""The local model registry: what a RegisterModel step creates, in SQLite (``registry.sqlite``).

One row per model package: group, version (1, 2, ... within the group, as SageMaker numbers
them), ARN, approval status, the model artifact URI, the model-quality metrics document the
step points to, and the whole request for anything else. ``trainpipe models`` lists them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS model_packages (
    group_name      TEXT NOT NULL,
    version         INTEGER NOT NULL,
    arn             TEXT NOT NULL UNIQUE,
    approval_status TEXT NOT NULL,
    model_data_url  TEXT NOT NULL,
    metrics_uri     TEXT,
    metrics_json    TEXT,
    execution_id    TEXT,
    created         TEXT NOT NULL,
    request_json    TEXT NOT NULL,
    PRIMARY KEY (group_name, version)
)
"""


@dataclass(frozen=True)
class ModelPackage:
    group: str
    version: int
    arn: str
    approval_status: str
    model_data_url: str
    metrics_uri: str | None
    metrics: dict | None
    execution_id: str | None
    created: str
    request: dict

    def primary_metric(self) -> str:
        """A short account of the metrics document (accuracy first when present)."""
        if not self.metrics:
            return ""
        flat = dict(_flatten(self.metrics))
        for key in ("metrics.accuracy.value", "metrics.loss.value"):
            if key in flat:
                return f"{key.split('.')[1]}={flat[key]:.4g}"
        numbers = [f"{k}={v:.4g}" for k, v in flat.items() if isinstance(v, (int, float))][:2]
        return ", ".join(numbers)


def _flatten(doc, prefix=""):
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _flatten(value, f"{prefix}{key}.")
    elif not isinstance(doc, (list, bool)):
        yield prefix.rstrip("."), doc


class Registry:
    def __init__(self, path: Path | str):
        self.path = Path(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30)
        try:
            connection.execute(_SCHEMA)
            with connection:  # one transaction
                yield connection
        finally:
            connection.close()

    def register(self, *, group: str, approval_status: str, model_data_url: str, region: str,
                 account: str, created: str, request: dict, metrics_uri: str | None = None,
                 metrics: dict | None = None, execution_id: str | None = None) -> ModelPackage:
        """Add the next version of ``group``."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # two concurrent runs must not take the same version
            (latest,) = db.execute(
                "SELECT COALESCE(MAX(version), 0) FROM model_packages WHERE group_name = ?", (group,)
            ).fetchone()
            version = latest + 1
            arn = f"arn:aws:sagemaker:{region}:{account}:model-package/{group}/{version}"
            db.execute(
                "INSERT INTO model_packages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (group, version, arn, approval_status, model_data_url, metrics_uri,
                 json.dumps(metrics) if metrics is not None else None, execution_id, created,
                 json.dumps(request, sort_keys=True)),
            )
        return ModelPackage(group, version, arn, approval_status, model_data_url, metrics_uri,
                            metrics, execution_id, created, request)

    def list(self, group: str | None = None) -> list[ModelPackage]:
        if not self.path.exists():
            return []
        query = "SELECT * FROM model_packages"
        args: tuple = ()
        if group:
            query += " WHERE group_name = ?"
            args = (group,)
        with self._connect() as db:
            rows = db.execute(query + " ORDER BY group_name, version", args).fetchall()
        return [
            ModelPackage(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]) if r[6] else None,
                         r[7], r[8], json.loads(r[9]))
            for r in rows
        ]
