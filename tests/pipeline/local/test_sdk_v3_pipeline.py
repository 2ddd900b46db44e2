"""A pipeline written with SageMaker Python SDK v3 runs unchanged under ``trainpipe run --local
--definition``: ScriptProcessor -> ModelTrainer(distributed=MPI(process_count_per_node=2),
instance_count=2) on the TF 2.14 training image -> evaluation -> ConditionStep ->
ModelBuilder.register() | FailStep. The definition and the files ModelTrainer uploads are
written by ``sdk_pipelines/v3.py`` in v3's format; the scripts are plain Python (the point is
the launch contract), the training one an mpi4py allreduce over the shards.

The whole pipeline is slow-marked (~30 s: three jobs, mpi4py installed from the code's
requirements); the refusal before any step runs is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.local.hosts import mpi, namespaces
from pipeline.local.store.storage import LocalStorage
from tests import readme_record

from .sdk_pipelines import v3

REPO = Path(__file__).resolve().parents[3]
BUCKET = "v3-bucket"
needs_namespaces = pytest.mark.skipif(
    namespaces.unavailable_reason() is not None,
    reason=f"the scripts open /opt/ml: {namespaces.unavailable_reason()}")
needs_mpi = pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed")

PREPROCESS = """
    import pathlib
    rows = open("/opt/ml/processing/input/raw.csv").read().split()
    out = pathlib.Path("/opt/ml/processing/train")
    for shard in range(2):
        (out / f"part-{shard}.csv").write_text("\\n".join(rows[shard::2]) + "\\n")
"""
TRAIN = """
    import argparse, json, os, pathlib
    from mpi4py import MPI
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--learning-rate", type=float)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rows = [float(x) for f in sorted(pathlib.Path(os.environ["SM_CHANNEL_TRAIN"]).glob("*.csv"))
            for x in f.read_text().split()]
    mine = rows[comm.Get_rank()::comm.Get_size()]
    total, count = comm.allreduce(sum(mine)), comm.allreduce(len(mine))
    print(f"rank {comm.Get_rank()} of {comm.Get_size()} on {os.environ['SM_CURRENT_HOST']}: "
          f"{len(mine)} rows, epochs={args.epochs}", flush=True)
    if comm.Get_rank() == 0:
        model = {"mean": total / count, "ranks": comm.Get_size()}
        pathlib.Path(os.environ["SM_MODEL_DIR"], "model.json").write_text(json.dumps(model))
"""
EVALUATE = """
    import json, pathlib, tarfile
    with tarfile.open("/opt/ml/processing/model/model.tar.gz") as tar:
        model = json.load(tar.extractfile("model.json"))
    accuracy = 1.0 if abs(model["mean"] - 5.5) < 1e-9 else 0.0
    report = {"metrics": {"accuracy": {"value": accuracy}}}
    pathlib.Path("/opt/ml/processing/evaluation/evaluation.json").write_text(json.dumps(report))
"""


def trainpipe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


TORCH_TRAIN = """
    import argparse, json, os, pathlib
    import torch
    import torch.distributed as dist
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--learning-rate", type=float)
    args = parser.parse_args()
    dist.init_process_group("gloo")  # torchrun set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = [float(x) for f in sorted(pathlib.Path(os.environ["SM_CHANNEL_TRAIN"]).glob("*.csv"))
            for x in f.read_text().split()]
    mine = rows[rank::world]
    total = torch.tensor([sum(mine), len(mine)], dtype=torch.float64)
    dist.all_reduce(total)
    print(f"rank {rank} of {world} on {os.environ['SM_CURRENT_HOST']} local rank {os.environ['LOCAL_RANK']}: "
          f"{len(mine)} rows, master {os.environ['MASTER_ADDR']}", flush=True)
    if rank == 0:
        model = {"mean": float(total[0] / total[1]), "ranks": world}
        pathlib.Path(os.environ["SM_MODEL_DIR"], "model.json").write_text(json.dumps(model))
    dist.barrier()  # every rank done before the group is torn down (destroy_process_group's contract)
    dist.destroy_process_group()
"""


def write_pipeline(workdir: Path, tmp_path: Path, distributed: dict, train: str = TRAIN,
                   image: str = v3.TF_IMAGE, requirements: str | None = "mpi4py\n") -> Path:
    """The objects a v3 notebook would have uploaded, in the run's store, and the definition."""
    storage = LocalStorage(workdir / "store")
    storage.put_bytes("\n".join(str(i) for i in range(1, 11)).encode() + b"\n", f"s3://{BUCKET}/raw/raw.csv")
    for name, text in (("preprocess.py", PREPROCESS), ("evaluate.py", EVALUATE)):
        storage.put_bytes(textwrap.dedent(text).encode(), f"s3://{BUCKET}/v3-spike/code/{name}")
    code_uri, drivers_uri = v3.put_job_files(
        storage, f"s3://{BUCKET}/v3-train/v3-train-20261127000206",
        {"train.py": train, **({"requirements.txt": requirements} if requirements else {})},
        v3.source_code("train.py", requirements="requirements.txt" if requirements else None), distributed)
    training = v3.training_arguments(code_uri, drivers_uri, output=f"s3://{BUCKET}/v3-train", instances=2,
                                     image=image,
                                     hyperparameters={"epochs": 2, "learning-rate": 0.1},
                                     channels=[v3.channel("train", "set by the definition")])
    definition = v3.pipeline_definition(BUCKET, training, preprocess_uri=f"s3://{BUCKET}/v3-spike/code/preprocess.py",
                                        evaluate_uri=f"s3://{BUCKET}/v3-spike/code/evaluate.py")
    path = tmp_path / "v3-pipeline.json"
    path.write_text(json.dumps(definition, indent=1))
    return path


def steps_of(workdir: Path) -> dict:
    (execution,) = (workdir / "runs").glob("*/execution.json")
    return {s["name"]: s for s in json.loads(execution.read_text())["steps"]}


@pytest.mark.slow
@needs_namespaces
@needs_mpi
def test_a_v3_pipeline_runs_unchanged_with_the_ranks_sagemaker_would_start(tmp_path):
    workdir = tmp_path / "work"
    definition = write_pipeline(workdir, tmp_path, v3.mpi(2))
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    steps = steps_of(workdir)
    assert [steps[s]["status"] for s in ("Preprocess", "Train", "Evaluate", "Check", "Register")] == ["Succeeded"] * 5
    assert steps["Fail"]["status"] == "NotExecuted"
    # The warning: 2 ranks as v3's mpirun -np 2 starts them, both on algo-1. Said once before
    # any step (the step's instance count is known), and once more only in the job's log (issue 47).
    out = done.stdout + done.stderr
    said = "SageMaker would start 2 MPI rank(s), not the 4 asked for (2 instances x process_count_per_node=2)"
    warning = out.index("warning: step Train: " + said)
    assert "mpi_additional_options=['-np', '4']" in out[warning:].splitlines()[0]
    assert out.count(said) == 1 and warning < out.index("==> [1/6] Preprocess")
    log = next((workdir / "runs").glob("*/jobs/*Train*/job.log")).read_text()
    assert "rank 0 of 2 on algo-1: 5 rows, epochs=2" in log and "rank 1 of 2 on algo-1: 5 rows, epochs=2" in log
    assert "on algo-2:" not in log
    assert log.count(said) == 1 and log.index(said) < log.index("rank 0 of 2 on algo-1")
    listed = trainpipe("models", "--workdir", str(workdir), "--json")
    (package,) = json.loads(listed.stdout)
    assert (package["ModelPackageGroupName"], package["ModelApprovalStatus"]) == ("digits-v3", "Approved")


@pytest.mark.slow
@needs_namespaces
def test_a_v3_torchrun_pipeline_runs_2_hosts_x_2_processes(tmp_path):
    """ModelTrainer(distributed=Torchrun(process_count_per_node=2), instance_count=2) on AWS's
    PyTorch 2.9 image: torchrun on both hosts, 4 ranks, the rendezvous at algo-1."""
    workdir = tmp_path / "work"
    definition = write_pipeline(workdir, tmp_path, v3.torchrun(2), train=TORCH_TRAIN, image=v3.TORCH_IMAGE,
                                requirements=None)
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    steps = steps_of(workdir)
    assert [steps[s]["status"] for s in ("Preprocess", "Train", "Evaluate", "Check", "Register")] == ["Succeeded"] * 5
    log = next((workdir / "runs").glob("*/jobs/*Train*/job.log")).read_text()
    for rank, host, local in (("0", "algo-1", "0"), ("1", "algo-1", "1"), ("2", "algo-2", "0"), ("3", "algo-2", "1")):
        assert f"rank {rank} of 4 on {host} local rank {local}: " in log, log[-3000:]
    assert "master algo-1" in log


def test_a_v3_training_step_whose_launch_cannot_be_determined_is_refused_before_any_step(tmp_path):
    workdir = tmp_path / "work"
    # A DistributedConfig of the user's own: its driver is not one this runner (or anyone
    # reading the definition) can know.
    definition = write_pipeline(workdir, tmp_path, {"process_count_per_node": 2, "hostfile": "/etc/hosts"})
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "step Train (sm_drivers channel s3://v3-bucket/v3-train/" in last
    assert "distributed.json has the fields ['hostfile', 'process_count_per_node']" in last
    readme_record.record(last)
    assert not (workdir / "runs").exists() or not list((workdir / "runs").glob("*/jobs/*"))


def test_a_v3_jobs_import_its_image_lacks_is_refused_before_any_step(tmp_path):
    """The pre-run image check reads a v3 job's code channel and sourcecode.json's
    requirements: the TF 2.14 training image ships no Horovod, and requirements.txt has none."""
    workdir = tmp_path / "work"
    definition = write_pipeline(workdir, tmp_path, v3.mpi(2), train=TRAIN.replace(
        "from mpi4py import MPI", "from mpi4py import MPI\n    import horovod.tensorflow as hvd"))
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "horovod" in last and "Train" in last and "tensorflow-training:2.14-cpu-py310" in last, last
    assert not (workdir / "runs").exists() or not list((workdir / "runs").glob("*/jobs/*"))


@pytest.mark.slow
@needs_namespaces
@needs_mpi
def test_our_training_entrypoint_runs_as_a_v3_mpi_job(tmp_path):
    """Step 2 of the move to v3 (docs/sdk-v3.md): our train.py and training_entry, uploaded as
    ModelTrainer's code channel, launched as v3's MPI driver launches it (`python -m mpi4py
    train.py`, v3's environment), with the warning's fix so the 2 ranks span both instances.
    About a minute: the one TensorFlow run of these tests."""
    from pipeline.definition.bundles import training_bundle
    from pipeline.local.jobs.v3.training_v3 import job_class
    from tests.training_entry.helpers import make_splits

    storage = LocalStorage(tmp_path / "store")
    for name, folder in make_splits(tmp_path / "splits", shard_count=2).items():
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                storage.put_file(path, f"s3://{BUCKET}/data/{name}/{path.relative_to(folder)}")
    code = {path: data.decode() for path, data in training_bundle().files.items()}
    code["requirements.txt"] = "mpi4py\n"  # v3's MPI driver runs every rank as python -m mpi4py
    code_uri, drivers_uri = v3.put_job_files(storage, f"s3://{BUCKET}/v3-train/ours", {},
                                             v3.source_code("train.py", requirements="requirements.txt"),
                                             v3.mpi(1, ["-np", "2"]))
    for path, text in code.items():
        storage.put_bytes(text.encode(), f"{code_uri}/{path}")
    request = v3.training_arguments(
        code_uri, drivers_uri, output=f"s3://{BUCKET}/out", instances=2,
        image="111122223333.dkr.ecr.us-east-1.amazonaws.com/trainpipe-training:2.14.1-cpu-py310-horovod0.28.1",
        hyperparameters={"epochs": 2, "batch-size": 32},
        channels=[v3.channel(n, f"s3://{BUCKET}/data/{n}") for n in ("train", "validation", "manifest")])
    result = job_class(request)(request, "ours", storage, tmp_path / "job", echo=False).run()
    log = (tmp_path / "job" / "job.log").read_text()
    assert result.status == "Completed", result.failure_reason + log[-3000:]
    assert "trainpipe: 2 ranks (2 host(s) x 1)" in log
    assert "[algo-2 rank 1] rank 1 on algo-2:" in log
    assert "trainpipe-metrics epoch=2 " in log and not result.warnings
    assert storage.exists(f"s3://{BUCKET}/out/ours/output/model.tar.gz")



def test_v3s_model_and_transform_steps_are_steps_the_runner_runs():
    """ModelStep(ModelBuilder.build()) then TransformStep, in v3's shapes (an unsuffixed Model
    step, an empty Environment), on the TF 2.14 inference image: planned, none stubbed or
    refused (the run itself is the v2 shape's, tests/pipeline/local/test_sdk_transform.py)."""
    from pipeline.local.dag import interpreter, stubs

    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.14-cpu"
    definition = {"Version": "2020-12-01", "Metadata": {}, "Parameters": [], "MlflowConfig": None, "Steps": [
        v3.model_step("CreateModel", f"s3://{BUCKET}/model/model.tar.gz", image),
        v3.transform_step("Batch", "CreateModel", f"s3://{BUCKET}/new-data/", f"s3://{BUCKET}/scored")]}
    nodes = interpreter.plan(definition)
    assert [(n.name, n.type) for n in nodes] == [("CreateModel", "Model"), ("Batch", "Transform")]
    ctx = interpreter.Context(parameters={}, execution={}, property_files={}, read_json=None)
    assert not any(stubs.unsupported(n) for n in nodes) and stubs.check(nodes, ctx, None) == []


def test_a_training_step_that_names_no_script_is_refused_before_any_step(tmp_path):
    """Neither v2's sagemaker_program nor v3's sm_drivers, on a framework image: refused before
    the processing step runs, not after it. (A built-in algorithm's image is refused naming the
    image: tests/pipeline/local/dag/test_training_kinds.py.)"""
    workdir = tmp_path / "work"
    path = write_pipeline(workdir, tmp_path, v3.mpi(2))
    definition = json.loads(path.read_text())
    train = next(s for s in definition["Steps"] if s["Name"] == "Train")["Arguments"]
    train["AlgorithmSpecification"] = {"TrainingInputMode": "File", "TrainingImage": v3.TF_IMAGE}
    train["InputDataConfig"] = [c for c in train["InputDataConfig"] if c["ChannelName"] == "train"]
    path.write_text(json.dumps(definition))
    done = trainpipe("run", "--local", "--definition", str(path), "--workdir", str(workdir))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "step Train: its launch cannot be determined: hyperparameter sagemaker_program is missing" in last
    assert not (workdir / "runs").exists() or not list((workdir / "runs").glob("*/jobs/*"))
    readme_record.record(last)


@pytest.mark.parametrize("path", ["/etc/passwd", "../../../../etc/passwd"], ids=["absolute", "climbing"])
def test_a_v3_requirements_path_out_of_the_code_is_refused_before_any_step(tmp_path, path):
    """SourceCode(requirements=...) naming a file of this machine: refused before any step,
    so the runner never reads it and pip never echoes it into the job's log."""
    workdir = tmp_path / "work"
    storage = LocalStorage(workdir / "store")
    code_uri, drivers_uri = v3.put_job_files(
        storage, f"s3://{BUCKET}/v3-train/v3-train-20261127000206", {"train.py": TRAIN},
        v3.source_code("train.py", requirements=path), v3.mpi(1))
    training = v3.training_arguments(code_uri, drivers_uri, output=f"s3://{BUCKET}/v3-train", instances=1,
                                     image=v3.TF_IMAGE, hyperparameters={"epochs": 1},
                                     channels=[v3.channel("train", f"s3://{BUCKET}/raw/")])
    storage.put_bytes(b"1\n", f"s3://{BUCKET}/raw/raw.csv")
    definition = tmp_path / "v3.json"
    definition.write_text(json.dumps({"Version": "2020-12-01", "Parameters": [],
                                      "Steps": [{"Name": "Train", "Type": "Training", "Arguments": training}]}))
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    readme_record.record(last)
    assert last.endswith(f"sourcecode.json's requirements {path!r} is not a file of the code: give "
                         f"SourceCode(requirements=...) a path inside source_dir, without a leading / or '..'"), last
    assert "root:" not in done.stdout + done.stderr
    assert not (workdir / "runs").exists() or not list((workdir / "runs").glob("*/jobs/*"))
