"""benchmarks/training/strategies.py: each layout is the train --local request its strategy needs, the
seconds to the threshold count the right epochs, and (slow) the whole benchmark at a tiny size
prints every RESULT line, with Horovod's and mirrored's accuracies equal (the same
synchronous algorithm, from the same seed). No timing is asserted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.training import strategies as S
from pipeline.local.jobs.train_local import build_training_request
from pipeline.local.store.storage import LocalStorage
from pipeline.settings import Settings
from training_entry import contract

REPO = Path(__file__).resolve().parents[3]
RESULT = re.compile(r"^RESULT (\S+) (\S+) target (\S+)$", re.MULTILINE)


def _splits(tmp_path: Path) -> dict[str, Path]:
    splits = {}
    for name in (contract.CHANNEL_TRAIN, contract.CHANNEL_MANIFEST):
        (tmp_path / name).mkdir()
        for shard in ("part-00000.tfrecord", "part-00001.tfrecord"):  # ShardedByS3Key: one per host
            (tmp_path / name / shard).write_bytes(b"x")
        splits[name] = tmp_path / name
    return splits


@pytest.mark.parametrize("layout", S.layouts(explore=True))
def test_each_layout_is_the_train_local_request_of_its_strategy(tmp_path, layout):
    code = S.write_code(tmp_path)
    spec = S.job_spec(layout, _splits(tmp_path), code, batch=32, epochs=2, workload="mlp", name="j")
    strategy = S.STRATEGY_OF[layout]
    request, _ = build_training_request(spec, Settings(distribution=strategy), LocalStorage(tmp_path / "s"), "j")
    hps = request["HyperParameters"]
    assert request["ResourceConfig"]["InstanceCount"] == (1 if layout == "one_process" else 2)
    # The same global batch for the baseline as for two synchronous workers.
    assert json.loads(hps[contract.HP_BATCH_SIZE]) == (64 if layout == "one_process" else 32)
    assert ("sagemaker_mpi_enabled" in hps) is (strategy == contract.STRATEGY_HOROVOD)
    assert json.loads(hps.get(contract.HP_DISTRIBUTION, '"horovod"')) == strategy
    train = next(c for c in request["InputDataConfig"] if c["ChannelName"] == contract.CHANNEL_TRAIN)
    sharding = train["DataSource"]["S3DataSource"]["S3DataDistributionType"]
    # parameter_server refuses ShardedByS3Key on 2 hosts (the chief reads no data).
    assert sharding == ("FullyReplicated" if strategy == contract.STRATEGY_PARAMETER_SERVER else "ShardedByS3Key")
    assert request["Environment"] == S.BEFORE_ENV.get(layout, {})
    assert json.loads(hps["sagemaker_program"]) == S.ENTRY and (code / "train.py").exists()


def test_seconds_to_the_threshold_add_the_epochs_up_to_the_first_at_it(tmp_path):
    job = S.Job("horovod", 10.0, {1: 100.0, 2: 200.0, 3: 400.0}, tmp_path, {1: 0.5, 2: 0.91, 3: 0.95})
    assert job.seconds_to(0.9, records=400) == pytest.approx(4.0 + 2.0)
    assert job.seconds_to(0.99, records=400) == float("inf")
    assert job.steady() == 300.0  # the epochs after the first (tracing)


def test_the_entry_keeps_every_epochs_checkpoint(tmp_path):
    # The wrapper's patch, run as the job would run it: save() no longer prunes to two.
    script = tmp_path / "check.py"
    patch = S.ENTRY_SOURCE.split("sys.argv[0] =")[0]
    script.write_text(patch + (
        "import tensorflow as tf\n"
        "state = tf.train.Checkpoint(v=tf.Variable(1.0))\n"
        f"for epoch in (1, 2, 3, 4):\n    checkpoints.save(state, {str(tmp_path / 'c')!r}, epoch)\n"
        f"print(len(checkpoints.complete({str(tmp_path / 'c')!r})))\n"))
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert out.stdout.strip().splitlines()[-1] == "4", out.stderr[-2000:]


@pytest.mark.slow
def test_the_benchmark_runs_at_a_tiny_size(tmp_path):
    env = {**os.environ, "TRAINPIPE_BENCH_WORK": str(tmp_path), "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.training.strategies", "--workloads", "mlp", "--replicate", "1",
                           "--epochs", "2", "--repeats", "1"], cwd=REPO, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = {name: float(value) for name, value, _ in RESULT.findall(proc.stdout)}
    names = {"strategies_mirrored_vs_horovod_mlp", "strategies_ps_vs_horovod_mlp"} | {
        f"strategies_{s}_{figure}_mlp" for s in ("one_process", "horovod", "mirrored", "ps")
        for figure in ("samples_per_s", "accuracy", "seconds_to_threshold")}
    assert names <= set(found), proc.stdout[-3000:]
    assert all(0.0 < found[f"strategies_{s}_accuracy_mlp"] <= 1.0 for s in ("one_process", "horovod", "mirrored", "ps"))
    # The same synchronous updates from the same seed: the same model, epoch after epoch.
    assert found["strategies_mirrored_accuracy_mlp"] == found["strategies_horovod_accuracy_mlp"]
    assert found["strategies_mirrored_vs_horovod_mlp"] > 0  # a ratio, not nan: both ran
