"""PyTorch pipelines written with the plain SageMaker SDK run unchanged by ``trainpipe run --local
--definition``, their jobs launched as SageMaker's PyTorch toolkit launches them: torchrun on
every simulated host (``torch_distributed``), pytorchddp's and MPI's mpirun. What cannot run here
is refused before any step.

Slow: each runs jobs whose ranks import torch (about 3 s each on 2 shared cores).
"""

from __future__ import annotations

import re

import pytest

from pipeline.local.hosts import namespaces
from tests import readme_record

from .test_sdk_pipelines import digits_csv, registered, steps_of, trainpipe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(namespaces.unavailable_reason() is not None,
                       reason=f"scripts that open /opt/ml need namespaces: {namespaces.unavailable_reason()}"),
]


def _session(tmp_path, bucket="sdk-bucket"):
    from sagemaker.s3 import S3Uploader

    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=tmp_path / "work", bucket=bucket)
    S3Uploader.upload(str(digits_csv(tmp_path / "raw_data_all.csv")), f"s3://{bucket}/digits",
                      sagemaker_session=session)
    return session


def _job_log(workdir, step: str) -> str:
    return next((workdir / "runs").glob(f"*/jobs/*{step}*/job.log")).read_text()


def test_a_torch_distributed_ddp_pipeline_trains_on_2_hosts_x_2_ranks_evaluates_and_registers(tmp_path):
    from .sdk_pipelines.pytorch import pytorch_pipeline

    session = _session(tmp_path)
    definition = tmp_path / "pytorch.json"
    definition.write_text(pytorch_pipeline(session, "sdk-bucket").definition())
    workdir = tmp_path / "work"
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = steps_of(workdir)
    assert steps["CheckAccuracy"]["detail"].endswith("is true -> if branch")
    (package,) = registered(workdir)
    assert package["ModelPackageGroupName"] == "sdk-pytorch-digits"
    assert package["Metrics"]["metrics"]["accuracy"]["value"] >= 0.8
    log = _job_log(workdir, "TrainModel")
    # torchrun on each host, 2 workers each, the rendezvous at algo-1 (resolved in the hosts' namespaces).
    assert "torchrun on each of the 2 host(s): 2 process(es) per host, rendezvous at algo-1:" in log
    ranks = re.findall(r"rank (\d) of 4 on (algo-\d) local rank (\d) master algo-1:(\d+)", log)
    assert sorted((r, h, lr) for r, h, lr, _ in ranks) == [
        ("0", "algo-1", "0"), ("1", "algo-1", "1"), ("2", "algo-2", "0"), ("3", "algo-2", "1")]
    # Every rank ends with the same weights (DDP broadcast rank 0's and averaged the gradients).
    digests = re.findall(r"rank \d weights (\w+) same on all ranks: True", log)
    assert len(digests) == 4 and len(set(digests)) == 1, log[-3000:]


def test_pytorchddp_and_mpi_jobs_run_their_launchers(tmp_path):
    from sagemaker.s3 import S3Uploader

    from .sdk_pipelines.pytorch import launchers_pipeline

    session = _session(tmp_path)
    (tmp_path / "split").mkdir()
    (tmp_path / "split" / "train.csv").write_text((tmp_path / "raw_data_all.csv").read_text())
    S3Uploader.upload(str(tmp_path / "split" / "train.csv"), "s3://sdk-bucket/digits-split/train",
                      sagemaker_session=session)
    definition = tmp_path / "launchers.json"
    definition.write_text(launchers_pipeline(session, "sdk-bucket").definition())
    workdir = tmp_path / "work"
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for step in ("TrainPyTorchDDP", "TrainMPI"):
        log = _job_log(workdir, step)
        assert "mpirun: " in log
        assert len(re.findall(r"rank \d weights \w+ same on all ranks: True", log)) == 2, log[-3000:]
    # pytorchddp's ranks run `python -m mpi4py train.py` and get torch's variables from their MPI rank.
    ddp = re.findall(r"rank (\d) of 2 on algo-1 local rank (\d) master algo-1:\d+ mpi4py True", _job_log(workdir, "TrainPyTorchDDP"))
    assert sorted(ddp) == [("0", "0"), ("1", "1")]
    assert "mpi4py False" in _job_log(workdir, "TrainMPI")


def _definition_with(tmp_path, distribution: dict, image: str | None = None, first_line: str = "") -> str:
    import shutil

    from .sdk_pipelines.pytorch import HERE, pytorch_pipeline

    code = shutil.copytree(HERE / "torch_code", tmp_path / "code")
    (code / "train.py").write_text(first_line + (code / "train.py").read_text())
    text = pytorch_pipeline(_session(tmp_path), "sdk-bucket", distribution=distribution,
                            source_dir=code).definition()
    if image is not None:
        text = text.replace("pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker", image)
    path = tmp_path / "refused.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("distribution, first_line, says", [
    # SDK v2 writes pytorchddp as smdistributed's dataparallel: the code using AWS's library is what is refused.
    ({"smdistributed": {"dataparallel": {"enabled": True}}}, "import smdistributed.dataparallel.torch.torch_smddp\n",
     "step TrainModel: code that imports smdistributed (train.py:1) cannot run locally"),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
      "mpi": {"enabled": True}}, "",
     'step TrainModel: distribution={"smdistributed": {"modelparallel": ...}} cannot run locally'),
])
def test_a_distribution_only_aws_images_have_is_refused_before_any_step(tmp_path, distribution, first_line, says):
    definition = _definition_with(tmp_path, distribution, first_line=first_line)
    done = trainpipe("run", "--local", "--definition", definition, "--workdir", str(tmp_path / "work"))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert says in line and 'torch_distributed' in line, line
    assert not list((tmp_path / "work").glob("runs/*/jobs/*"))  # no step ran
    readme_record.record(line.removeprefix("trainpipe run: error: "))


def test_torchrun_where_the_jobs_python_has_no_torch_is_refused_before_any_step(tmp_path):
    import os
    import subprocess

    from pipeline.local.jobs.environments.interpreters import find_python

    # The image's jobs mapped to a Python without torch (as on a machine where trainpipe was
    # installed without its local extras): refused before the processing step, naming that Python.
    bare = find_python("3.12") or find_python("3.10")
    if bare is None or subprocess.run([bare, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("needs a Python without torch on PATH")
    definition = _definition_with(tmp_path, {"torch_distributed": {"enabled": True}})
    env = dict(os.environ, TRAINPIPE_IMAGE_PYTHON=f"pytorch-training={bare}")
    done = trainpipe("run", "--local", "--definition", definition, "--workdir", str(tmp_path / "work"), env=env)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert "runs torchrun, which needs PyTorch" in line and f"({bare})" in line and "has no torch" in line, line
    assert not list((tmp_path / "work").glob("runs/*/jobs/*"))
    readme_record.record(line.removeprefix("trainpipe run: error: "))


def test_torchrun_on_a_tensorflow_image_is_refused_before_any_step(tmp_path):
    tf_image = "tensorflow-training:2.14.1-cpu-py310-ubuntu20.04-sagemaker"
    definition = _definition_with(tmp_path, {"torch_distributed": {"enabled": True}}, image=tf_image)
    done = trainpipe("run", "--local", "--definition", definition, "--workdir", str(tmp_path / "work"))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert "runs torchrun, which needs PyTorch, and the image" in line, line
    assert "has none (record aws-tensorflow-training-2.14)" in line and "pytorch-training:2.9 or 2.10" in line, line
    assert not list((tmp_path / "work").glob("runs/*/jobs/*"))
    readme_record.record(line.removeprefix("trainpipe run: error: "))
