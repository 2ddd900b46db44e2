"""A workdir of recorded local runs, as `trainpipe run --local` writes them (execution.json
and the training job's metrics.json), with step times made by a known model."""

from __future__ import annotations

import json
from pathlib import Path

from training_entry.contract import HP_TORCH_STRATEGY

PARAMETERS = 17226


def write_run(workdir: Path, execution_id: str, *, hosts: int, ppn: int, batch: int,
              step_seconds: list[float], cpu_seconds: list[float], cores: int = 2,
              instance_type: str = "ml.c5.xlarge", tensors: int | None = None,
              step_spread: list[float] | None = None, steps_per_execution: int | None = None,
              job_seconds: float | None = None, co2e_kg: float | None = None,
              workload: dict | None = None, start: str | None = None,
              parameters: int = PARAMETERS) -> Path:
    """``workload``: the job's model and data as a run records them, e.g. {"architecture":
    "auto", "image_size": 64, "kind": "image", "num_features": 0, "records": 800}: the
    hyperparameters, and the train manifest in the workdir's store behind the run's manifest
    channel (runs recorded before the advisor read them have none)."""
    run_dir = Path(workdir) / "runs" / execution_id
    job_dir = run_dir / "jobs" / f"trainpipe-TrainModel-{execution_id}"
    job_dir.mkdir(parents=True)
    series = {
        "step_time": [{"value": v} for v in step_seconds],
        "cpu_time": [{"value": v} for v in cpu_seconds],
        "parameters": [{"value": parameters} for _ in step_seconds],
    }
    if step_spread is not None:  # runs recorded before the step_spread metric have none
        series["step_spread"] = [{"value": v} for v in step_spread]
    (job_dir / "metrics.json").write_text(json.dumps(series))
    doc = {
        "execution_id": execution_id, "status": "Succeeded",
        "parameters": {"TrainingInstanceCount": hosts, "ProcessesPerHost": ppn, "BatchSize": batch,
                       "TrainingInstanceType": instance_type, "Epochs": len(step_seconds)},
        "steps": [
            {"name": "PreprocessData", "type": "Processing", "status": "Succeeded", "metrics": {}},
            {"name": "TrainModel", "type": "Training", "status": "Succeeded", "job_dir": str(job_dir),
             "metrics": {"step_time": step_seconds[-1], "cpu_time": cpu_seconds[-1], "parameters": parameters},
             "properties": {"HyperParameters": {"batch-size": json.dumps(batch), "fp16-allreduce": "false"}},
             "cost": {"machine": {"cpu": "AMD EPYC", "cores": cores}}},
        ],
    }
    if steps_per_execution is not None:  # runs recorded before the hyperparameter have none
        hps = doc["steps"][1]["properties"]["HyperParameters"]
        hps["steps-per-execution"] = json.dumps(steps_per_execution)
    if job_seconds is not None:  # what the run's cost record measured (accounting.local_job_cost)
        doc["steps"][1]["cost"].update(seconds=job_seconds, energy={"kwh": 1e-4, "co2e_kg": co2e_kg})
    if start is not None:
        doc["steps"][1]["start"] = start
    if workload is not None:
        _record_workload(Path(workdir), execution_id, doc["steps"][1], workload)
    if tensors is not None:  # runs recorded before the gradient_tensors metric have none
        doc["steps"][1]["metrics"]["tensors"] = tensors
    (run_dir / "execution.json").write_text(json.dumps(doc))
    return run_dir


def _record_workload(workdir: Path, execution_id: str, step: dict, workload: dict) -> None:
    hps = step["properties"]["HyperParameters"]
    hps["model-architecture"] = json.dumps(workload.get("architecture", "auto"))
    hps["image-size"] = json.dumps(workload.get("image_size", 32))
    key = f"trainpipe/{execution_id}/PreprocessData/output/manifest"
    step["properties"]["InputDataConfig"] = [
        {"ChannelName": "manifest", "DataSource": {"S3DataSource": {"S3Uri": f"s3://bucket/{key}"}}}]
    if "train_uri" in workload:  # the records, where the test put them in the store
        step["properties"]["InputDataConfig"].append(
            {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": workload["train_uri"]}}})
    if workload.get("mixed_precision"):
        hps["mixed-precision"] = json.dumps(workload["mixed_precision"])
    if workload.get("strategy"):  # the PyTorch room's (-p Framework=pytorch)
        hps[HP_TORCH_STRATEGY] = json.dumps(workload["strategy"])
    manifest_dir = workdir / "store" / "bucket" / key
    manifest_dir.mkdir(parents=True)
    (manifest_dir / "train.json").write_text(json.dumps({
        "split": "train", "kind": workload["kind"], "num_features": workload.get("num_features", 0),
        "num_classes": 2, "total_records": workload.get("records", 1000), "shards": []}))


def recorded_workdir(workdir: Path) -> Path:
    """One 1-rank run (2 ms steps using 1 core's worth of CPU), a 1x2 and a 2x1 run."""
    write_run(workdir, "r1", hosts=1, ppn=1, batch=32, step_seconds=[0.05, 0.0020, 0.0021, 0.0019],
              cpu_seconds=[0.02, 0.0020, 0.0021, 0.0019])
    write_run(workdir, "r2", hosts=1, ppn=2, batch=32, step_seconds=[0.06, 0.0023, 0.0024, 0.0022],
              cpu_seconds=[0.02, 0.0021, 0.0021, 0.0020])
    write_run(workdir, "r3", hosts=2, ppn=1, batch=32, step_seconds=[0.07, 0.0030, 0.0031, 0.0029],
              cpu_seconds=[0.02, 0.0021, 0.0021, 0.0020])
    return workdir
