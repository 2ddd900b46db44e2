"""The preprocessing job's MLflow run on SageMaker (``trainpipe definition --tracking-uri``):
the data summary (records and shards per split, the data's kind, its classes), in a child run
of the execution's run (training_entry/tracking.py). The first host logs it: it alone writes
the manifests, and the other hosts' shards are counted in them. Nothing without the
definition's variables (a local run's runner logs the step itself); never fails the step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from processing import contract
from training_entry import tracking
from training_entry.contract import container_path
from training_entry.input import records

TRAIN_SPLIT = "train"


def log_data_summary(environ: Mapping[str, str] = os.environ) -> None:
    if not tracking.wanted(environ):
        return
    folder = Path(container_path(contract.OUTPUT_DIRS[contract.OUTPUT_MANIFEST]))
    manifests = {}
    for split in contract.OUTPUT_DIRS:
        path = folder / records.manifest_name(split)
        if path.is_file():
            manifests[split] = json.loads(path.read_text())
    if TRAIN_SPLIT not in manifests or not tracking.ensure_mlflow(environ):
        return  # not the first host: it wrote no manifests, and logs nothing
    train = manifests[TRAIN_SPLIT]
    names = train.get("class_names")
    run = tracking.JobRun.start({
        "kind": train.get("kind", ""), "num_classes": train.get("num_classes", ""),
        "num_features": train.get("num_features", ""),
        **({"class_names": ",".join(map(str, names))} if names else {}),
        "shards_per_split": len(train.get("shards") or []),
    }, environ, job_name="preprocess")
    if run is None:
        return
    figures = {"classes": train.get("num_classes")}
    for split, manifest in manifests.items():
        shards = manifest.get("shards") or []  # [{"name", "records"}] (records.Manifest.to_json)
        figures[f"records_{split}"] = sum(int(s.get("records", 0)) for s in shards)
        figures[f"shards_{split}"] = len(shards)
    run.metrics(figures)
    run.end()
