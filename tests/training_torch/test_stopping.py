"""SIGTERM in the PyTorch room (``training_torch/stopping.py``): SageMaker stops a job (a tuning
job's early stopping) with SIGTERM and a grace period, then uploads /opt/ml/model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.hosts.torchrun import free_port
from tests.training_entry.helpers import make_splits

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_every_rank_after_the_same_epoch_and_rank_0_saves(tmp_path):
    """The signal reaches rank 1 alone (torchrun and rank 0 never see it): both ranks agree
    through the epoch's all_reduce, stop after that epoch, rank 0 writes the model, and the
    job exits 0, well before its 200 epochs."""
    splits = make_splits(tmp_path / "splits", shard_count=2)
    model_dir = tmp_path / "model"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_SIZE", "MASTER_"))}
    env.update({
        "SM_CHANNEL_TRAIN": str(splits["train"]), "SM_CHANNEL_VALIDATION": str(splits["validation"]),
        "SM_CHANNEL_MANIFEST": str(splits["manifest"]), "SM_MODEL_DIR": str(model_dir),
        "SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1", "PYTHONPATH": str(REPO),
        "SM_INPUT_DATA_CONFIG": json.dumps({c: {"S3DistributionType": "FullyReplicated"} for c in ("train", "validation")}),
    })
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(REPO / "training_torch" / "train.py"),
               "--epochs", "200", "--batch-size", "32"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "trainpipe-metrics epoch=1 " in line:
                # torchrun's workers are its children, started in rank order; signal rank 1's only.
                os.kill(sorted(_children(proc.pid))[1], signal.SIGTERM)
                break
        lines += proc.stdout.readlines()
        assert proc.wait(timeout=600) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    output = "".join(lines)
    (stopped,) = re.findall(r"stopped \(SIGTERM\) after epoch (\d+): saving the model trained so far", output)
    epochs = re.findall(r"trainpipe-metrics epoch=(\d+) ", output)
    assert epochs[-1] == stopped and int(stopped) < 200
    assert any(model_dir.iterdir())  # rank 0 saved the model it had


def _torch_tune_request(storage, tmp_path: Path, **parameters) -> tuple[dict, dict]:
    """TuneModel's request for ``run --local --tune 3 --tune-parallel 1 -p Framework=pytorch``,
    as the runner evaluates it, with the PyTorch bundles and the digits' shards in the store."""
    from pipeline.definition.build import STEP_TUNE, build_definition
    from pipeline.definition.bundles import all_bundles
    from pipeline.local.dag import interpreter
    from pipeline.local.store.storage import join_uri
    from pipeline.settings import Settings

    settings = Settings(tune_jobs=3, tune_parallel_jobs=1)
    parameters = {"Framework": "pytorch", **parameters}
    definition = build_definition(settings, parameters)
    for bundle in all_bundles(framework="pytorch").values():
        prefix = f"s3://{settings.bucket}/{bundle.key_prefix(settings.prefix)}"
        for relative, blob in bundle.objects().items():
            storage.put_bytes(blob, join_uri(prefix, relative))
    splits = make_splits(tmp_path / "digits", shard_count=2)
    outputs = []
    for name, folder in splits.items():
        uri = f"s3://{settings.bucket}/{settings.prefix}/e-1/PreprocessData/output/{name}"
        for path in folder.iterdir():
            storage.put_file(path, f"{uri}/{path.name}")
        outputs.append({"OutputName": name, "S3Output": {"S3Uri": uri}})
    # Framework is fixed at build: the definition declares no such parameter to start with.
    started = {k: v for k, v in parameters.items() if k != "Framework"}
    ctx = interpreter.Context(parameters=interpreter.resolve_parameters(definition, started),
                              execution={"PipelineExecutionId": "e-1"},
                              properties={"PreprocessData": {"ProcessingOutputConfig": {"Outputs": outputs}}})
    (step,) = [s for s in definition["Steps"] if s["Name"] == STEP_TUNE]
    return interpreter.evaluate(step["Arguments"], ctx), splits


@pytest.mark.slow
def test_a_pytorch_trial_stopped_early_by_the_local_tuner_keeps_the_model_of_its_last_epoch(tmp_path):
    """The tuner's early stopping (Auto, the median rule) on three PyTorch trials (torchrun, 1
    host x 2 ranks, the digits), one at a time, the rates fixed (Grid) so that the third trails
    the first two: SIGTERM reaches its ranks (and torchrun), they stop after the same epoch,
    rank 0 saves, and the trial is Stopped with that model kept."""
    import json as json_

    from pipeline.local.jobs.tuning import hyperparameter_tuning as ht
    from pipeline.local.store.storage import LocalStorage

    storage = LocalStorage(tmp_path / "store")
    epochs = 12  # far more than the stopped trial gets to
    request, _ = _torch_tune_request(storage, tmp_path, Epochs=epochs, TrainingInstanceCount=1, ProcessesPerHost=2)
    config = request["HyperParameterTuningJobConfig"]
    assert config["TrainingJobEarlyStoppingType"] == "Auto"
    config["Strategy"] = "Grid"
    config["ParameterRanges"] = {"CategoricalParameterRanges": [
        {"Name": "base-learning-rate", "Values": ["0.01", "0.005", "0.00002"]}]}
    request["TrainingJobDefinition"]["StaticHyperParameters"].update({"batch-size": "32", "warmup-epochs": "0"})
    job = ht.HyperparameterTuningJob(request, "tune-torch", storage, tmp_path / "jobs", echo=False,
                                     environments=tmp_path / "environments")
    result = job.run()
    log = (job.log_dir / "tuning-job.log").read_text()
    third = next(t for t in result.trials if t.number == 3)
    assert [t.status for t in result.trials] == ["Completed", "Completed", "Stopped"], log[-3000:]
    trial_log = third.job.log_path.read_text()
    (said,) = re.findall(r"stopped \(SIGTERM\) after epoch (\d+): saving the model trained so far", trial_log)
    assert len(re.findall(r"trainpipe-metrics epoch=\d+ ", trial_log)) == int(said) < epochs, trial_log[-3000:]
    assert third.kept_model, log[-3000:]
    assert json_.loads((third.job.job_dir / "description.json").read_text())["ModelArtifacts"]["S3ModelArtifacts"]
