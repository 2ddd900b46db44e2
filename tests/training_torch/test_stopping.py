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
