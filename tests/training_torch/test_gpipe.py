"""GPipe (``training_torch/strategies/gpipe.py``): its refusals and bubble arithmetic (unit), and
the entrypoint under torchrun with 2 ranks = 2 stages of one pipeline on the digits, against DDP
on the same epochs (slow: two torchrun jobs, ~30 s on 2 shared cores; the DDP one is
conftest.ddp_digits, shared with test_train and test_zero)."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from tests.training_torch.conftest import DDP_DIGITS  # noqa: E402
from tests.training_torch.test_train import run_torchrun  # noqa: E402
from training_torch import networks  # noqa: E402
from training_torch.strategies import gpipe  # noqa: E402


def test_gpipe_refuses_one_rank_per_host_in_one_line():
    with pytest.raises(ValueError, match=r"this host runs 1: start 2 or more processes per host") as error:
        gpipe.check(local_size=1, batch_size=32, micro_batches=4)
    assert "\n" not in str(error.value)


def test_gpipe_refuses_a_batch_that_does_not_split_into_the_micro_batches():
    with pytest.raises(ValueError, match=r"batch-size=30 does not split into micro-batches=4 .*e\.g\. 32.*"
                                         r"micro-batches=3") as error:
        gpipe.check(local_size=2, batch_size=30, micro_batches=4)
    assert "\n" not in str(error.value)
    gpipe.check(local_size=2, batch_size=32, micro_batches=8)  # fits: no error


def test_gpipe_refuses_a_model_with_fewer_layers_than_stages():
    model = networks.mlp(64, 10)  # 3 Linear layers
    assert [len(list(p.parameters())) > 0 for p in gpipe.split(model, 3)] == [True] * 3
    with pytest.raises(ValueError, match=r"cannot be split into 4 stages .*run fewer processes per host or use ddp"):
        gpipe.split(model, 4)


def test_stages_balance_the_given_costs_not_the_parameter_counts():
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])  # equal parameters
    assert [len(s) for s in networks.stages(model, 2)] == [2, 2]
    # The last layer costs as much as the other three: it is a stage of its own.
    assert [len(s) for s in networks.stages(model, 2, [1.0, 1.0, 1.0, 3.0])] == [3, 1]
    five = nn.Sequential(*[nn.Linear(8, 8) for _ in range(5)])
    assert [len(s) for s in networks.stages(five, 3, [1.0, 1.0, 4.0, 1.0, 1.0])] == [2, 1, 2]


def test_small_cnn_is_cut_by_measured_time_with_a_convolution_in_each_stage():
    # By parameter counts (the cut before), all three convolutions were stage 0 and the dense
    # layer alone stage 1: no overlap to pipeline.
    model = networks.small_cnn(10)
    costs = networks.layer_costs(model, networks.sample_input(model, 8, 32))
    assert len(costs) == len(model) and all(c > 0 for c in costs)
    for stage in networks.stages(model, 2, costs):
        assert any(isinstance(layer, nn.Conv2d) for layer in stage), [type(layer).__name__ for layer in stage]


def test_layer_costs_leave_no_gradients_and_no_moved_statistics():
    model = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    networks.layer_costs(model, torch.randn(16, 6))
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_idle_share_is_the_window_minus_the_busy_time_and_matches_gpipe_for_an_ideal_schedule():
    assert gpipe.expected_idle_share(2, 1) == 0.5 and gpipe.expected_idle_share(2, 4) == pytest.approx(0.2)
    # An ideal K=2, M=4 step in slots of 1 (forward + backward of one micro-batch per slot): stage 0
    # is busy in slots 0-3 and 5-8... (fill-drain), each stage busy 4 of the 5 slots' worth.
    m, f, b = 4, 1.0, 2.0
    stage0 = [(f"F{i}", i * f, (i + 1) * f) for i in range(m)]
    stage1 = [(f"F{i}", (i + 1) * f, (i + 2) * f) for i in range(m)]
    start_b = (m + 1) * f
    stage1 += [(f"B{i}", start_b + i * b, start_b + (i + 1) * b) for i in range(m)]
    stage0 += [(f"B{i}", start_b + (i + 1) * b, start_b + (i + 2) * b) for i in range(m)]
    end = start_b + (m + 1) * b
    steps = [[(0.0, end, stage0)], [(0.0, end - b, stage1)]]
    shares = [idle for _, _, idle in gpipe.idle_shares(steps)]
    assert shares == pytest.approx([gpipe.expected_idle_share(2, m)] * 2)


@pytest.mark.slow
def test_gpipe_trains_the_digits_like_ddp_and_exports_a_model_that_scores_the_test_split(tmp_path, ddp_digits):
    from training_entry.contract import parse_metric_line
    from training_entry.input import records
    from training_torch import data, export

    ddp_out, _, _ = ddp_digits  # DDP with the same arguments (conftest.DDP_DIGITS)
    out, model_dir, splits = run_torchrun(tmp_path / "gpipe", *DDP_DIGITS, "--strategy", "gpipe", "--micro-batches", "4")
    ddp = [parse_metric_line(line) for line in ddp_out.splitlines() if "trainpipe-metrics" in line]
    epochs = [parse_metric_line(line) for line in out.splitlines() if "trainpipe-metrics" in line]
    assert len(epochs) == 4 and epochs[-1]["loss"] < epochs[0]["loss"]
    # The same epochs reach DDP's validation accuracy (measured 2026-11-28: see the report).
    assert abs(epochs[-1]["val_accuracy"] - ddp[-1]["val_accuracy"]) <= 0.03, (epochs[-1], ddp[-1])
    assert 0.0 < epochs[-1]["accuracy"] <= 1.0  # the last stage's counts, each example once
    # Each stage's timeline: one line per stage per epoch, the measured idle share beside GPipe's 1/5.
    lines = [line for line in out.splitlines() if line.startswith("trainpipe-gpipe ")]
    assert len(lines) == 8
    for line in lines[-2:]:
        assert re.search(r"stages=2 micro_batches=4 steps=\d+ busy=[\d.]+ busy_cpu=[\d.]+ window=[\d.]+ idle_share=[\d.]+ "
                         r"gpipe_idle_share=0\.2000 last_step_ms=F0:", line), line
        assert line.count("F") == 4 and line.count("B") == 4
    assert "L0" not in lines[-1] and ",L:" in lines[-1]  # the last stage computes the loss
    # Stage-partitioned training state: neither rank holds the other's parameters' optimizer state.
    state = re.search(r"strategy=gpipe world=2 state_bytes_per_rank=(\d+) (\d+)", out)
    whole = sum(p.numel() * 4 for p in networks.mlp(64, 10).parameters())
    tensors = len(list(networks.mlp(64, 10).parameters()))  # Adam keeps a 4-byte step per tensor too
    assert state and int(state.group(1)) + int(state.group(2)) == 4 * whole + 4 * tensors  # params, grads, 2 moments
    # The exported model is the whole network, reassembled from both stages.
    model, metadata = export.load(str(model_dir))
    assert metadata["kind"] == "table"
    test = data.load([str(p) for p in sorted(splits["test"].glob("*.tfrecord"))], records.KIND_TABLE, 32)
    with torch.no_grad():
        accuracy = float((model(test.x).argmax(1) == test.y).float().mean())
    assert accuracy > 0.85


@pytest.mark.slow
def test_gpipe_on_2_hosts_x_2_ranks_is_data_parallel_across_the_hosts(tmp_path):
    """Two torchrun agents on this machine stand for two hosts: each host's 2 ranks are one
    pipeline, the same stage on both hosts averages its gradients (~25 s)."""
    import json
    import os
    import subprocess
    import sys

    from pipeline.local.hosts.torchrun import free_port
    from tests.training_entry.helpers import make_splits
    from tests.training_torch.test_train import REPO
    from training_entry.contract import parse_metric_line

    splits = make_splits(tmp_path / "splits", shard_count=4)
    port, runs = free_port(), []
    for node in (0, 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_SIZE", "MASTER_"))}
        env.update({
            "SM_CHANNEL_TRAIN": str(splits["train"]), "SM_CHANNEL_VALIDATION": str(splits["validation"]),
            "SM_CHANNEL_MANIFEST": str(splits["manifest"]), "SM_MODEL_DIR": str(tmp_path / f"model{node}"),
            "SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": f"algo-{node + 1}", "PYTHONPATH": str(REPO),
            "SM_INPUT_DATA_CONFIG": json.dumps({c: {"S3DistributionType": "FullyReplicated"}
                                                for c in ("train", "validation")}),
        })
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node}",
                   "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
                   str(REPO / "training_torch" / "train.py"), "--epochs", "3", "--batch-size", "32",
                   "--base-learning-rate", "0.002", "--strategy", "gpipe", "--micro-batches", "4"]
        runs.append(subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True))
    outs = [run.communicate(timeout=600)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outs[0][-3000:] + outs[1][-3000:]
    out = outs[0]
    epochs = [parse_metric_line(line) for line in out.splitlines() if "trainpipe-metrics" in line]
    assert len(epochs) == 3 and epochs[-1]["val_accuracy"] > 0.85
    # Each host's pipeline takes half the data: 20 steps an epoch where one host takes 40.
    assert re.search(r"trainpipe-gpipe stage=1 stages=2 micro_batches=4 steps=20 ", out)
    state = re.search(r"strategy=gpipe world=4 state_bytes_per_rank=(\d+) (\d+) (\d+) (\d+)", out)
    assert state and state.group(1) == state.group(3) and state.group(2) == state.group(4)
