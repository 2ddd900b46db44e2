"""ZeRO through DeepSpeed (training_torch/strategies/zero.py) under torchrun: ZeRO-3 on 2 ranks
trains the digits as DDP does, each rank holds about half of DDP's model states (measured from
the tensors, the line train.py prints), and the whole model it exports scores the test split.

Slow-marked: two torchrun jobs (~35 s on 2 shared cores once DeepSpeed's CPU communication op
is built; the first use on a machine compiles it, ~90 s, cached in ~/.cache/torch_extensions);
the DDP one is conftest.ddp_digits, shared with test_train and test_gpipe.
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
from tests.training_torch.conftest import DDP_DIGITS as EPOCHS  # noqa: E402


def _last_val_accuracy(out: str) -> float:
    from training_entry.contract import parse_metric_line

    return [parse_metric_line(line) for line in out.splitlines() if "trainpipe-metrics" in line][-1]["val_accuracy"]


def _state_bytes(out: str, strategy: str) -> list[int]:
    found = re.search(rf"strategy={strategy} world=2 state_bytes_per_rank=(\d+) (\d+)", out)
    assert found, out[-2000:]
    return [int(found.group(1)), int(found.group(2))]


@pytest.mark.slow
def test_zero3_on_2_ranks_trains_as_ddp_holds_half_its_state_and_exports_a_whole_model(tmp_path, ddp_digits):
    pytest.importorskip("deepspeed")
    from tests.training_torch.test_train import run_torchrun
    from training_entry.input import records
    from training_torch import data, export

    ddp_out, _, _ = ddp_digits  # DDP with EPOCHS (conftest.DDP_DIGITS)
    zero_out, model_dir, splits = run_torchrun(tmp_path / "zero3", *EPOCHS, "--strategy", "zero3")
    gap = abs(_last_val_accuracy(zero_out) - _last_val_accuracy(ddp_out))
    assert gap <= 0.03, (gap, _last_val_accuracy(zero_out), _last_val_accuracy(ddp_out))
    ddp, zero = _state_bytes(ddp_out, "ddp"), _state_bytes(zero_out, "zero3")
    # ZeRO-3: parameters, gradients and Adam's moments partitioned: 16Ψ/N per rank against
    # DDP's 16Ψ, so 1/2 at N = 2 (plus Adam's step counter); the bound is 0.6.
    assert max(zero) / ddp[0] <= 0.6, (zero, ddp)
    model, metadata = export.load(str(model_dir))  # the gathered weights, not one rank's partition
    test = data.load([str(p) for p in sorted(splits["test"].glob("*.tfrecord"))], records.KIND_TABLE, 32)
    with torch.no_grad():
        accuracy = float((model(test.x).argmax(1) == test.y).float().mean())
    assert accuracy > 0.85
    assert sum(p.numel() for p in model.parameters()) == int(re.findall(r"model_parameters=(\d+)", zero_out)[-1])


def test_a_zero_stage_on_one_rank_is_refused_in_one_line_before_deepspeed_starts(tmp_path):
    import torch.distributed as dist

    from training_torch import strategies

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match=r"zero3 partitions .* needs 2 or more, this job has 1; .*--strategy ddp") as refused:
            strategies.get("zero3").wrap(torch.nn.Linear(2, 2), lambda params: torch.optim.Adam(params))
        assert "\n" not in str(refused.value)
    finally:
        dist.destroy_process_group()
