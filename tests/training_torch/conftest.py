"""The one DDP run on the digits (2 ranks, 4 epochs) that test_train, test_gpipe and test_zero
read: each ran the same torchrun job (the same arguments, seed 0 being train.py's default) before."""

from __future__ import annotations

import pytest

# The arguments every comparison with DDP uses; test_zero and test_gpipe run their strategy with them.
DDP_DIGITS = ("--epochs", "4", "--batch-size", "32", "--base-learning-rate", "0.002", "--seed", "0")


@pytest.fixture(scope="session")
def ddp_digits(tmp_path_factory):
    """(stdout, model_dir, splits) of ``torchrun`` on train.py --strategy ddp with DDP_DIGITS
    (read only: tests load its model and splits, none writes there)."""
    pytest.importorskip("torch")
    from tests.training_torch.test_train import run_torchrun

    return run_torchrun(tmp_path_factory.mktemp("ddp-digits"), *DDP_DIGITS, "--strategy", "ddp")
