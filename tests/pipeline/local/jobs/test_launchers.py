"""Which launcher an SDK v2 job runs, and what is refused (``pipeline/local/jobs/launchers.py``)."""

from __future__ import annotations

import pytest

from pipeline.images import catalog
from pipeline.local.jobs import launchers

TF_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14.1-cpu-py310"
TORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker"


@pytest.mark.parametrize("framework, expected", [
    ({}, launchers.PROCESS),
    ({"sagemaker_mpi_enabled": True}, launchers.MPIRUN),
    ({"sagemaker_pytorch_ddp_enabled": True}, launchers.PYTORCHDDP),
    # SDK v2 writes pytorchddp as smdistributed's dataparallel: the same SMDataParallel runner.
    ({"sagemaker_distributed_dataparallel_enabled": True}, launchers.PYTORCHDDP),
    ({"sagemaker_torch_distributed_enabled": True}, launchers.TORCHRUN),
    ({"sagemaker_torch_distributed_enabled": False}, launchers.PROCESS),
])
def test_the_launcher_is_the_toolkits_choice(framework, expected):
    assert launchers.launcher(framework) == expected


def test_processes_per_host_are_the_parameter_else_the_gpus_else_one():
    torch = launchers.TORCHRUN
    assert launchers.processes_per_host({"sagemaker_mpi_num_of_processes_per_host": 3}, "ml.c5.xlarge", torch) == 3
    assert launchers.processes_per_host({}, "ml.g5.12xlarge", torch) == 4
    assert launchers.processes_per_host({}, "ml.c5.xlarge", torch) == 1
    assert launchers.processes_per_host({}, "ml.g5.12xlarge", launchers.MPIRUN) == 1


def test_smdistributed_is_refused_for_its_library_not_for_the_flag():
    flags = {"sagemaker_distributed_dataparallel_enabled": "true"}
    assert launchers.refusal(flags, "step T", {"train.py": "import torch\n"}) is None
    line = launchers.refusal(flags, "step T", {"train.py": "import os\nimport smdistributed.dataparallel.torch\n"})
    assert line.startswith("step T: code that imports smdistributed (train.py:2) cannot run locally")
    parallel = launchers.refusal({"mp_parameters": '{"partitions": 2}'}, "step T")
    assert 'distribution={"smdistributed": {"modelparallel": ...}} cannot run locally' in parallel
    assert "\n" not in line + parallel


def test_torch_is_missing_where_neither_the_image_nor_the_requirements_have_it(tmp_path):
    tf_record = catalog.find(TF_IMAGE)
    assert "has none (record aws-tensorflow-training-2.14)" in launchers.torch_missing(
        "torchrun job", TF_IMAGE, tf_record, False, "python")
    assert launchers.torch_missing("torchrun job", TF_IMAGE, tf_record, True, "python") is None
    no_torch = tmp_path / "python"
    no_torch.write_text("#!/bin/sh\nexit 1\n")
    no_torch.chmod(0o755)
    said = launchers.torch_missing("torchrun job", TORCH_IMAGE, catalog.find(TORCH_IMAGE), False, str(no_torch))
    assert f"this machine's Python ({no_torch}), which runs its jobs, has no torch" in said
    assert launchers.installs_torch("numpy\ntorch==2.9.0\n") and not launchers.installs_torch("numpy\n")
