"""SDK v3 ModelTrainer training jobs run as v3's drivers run them (``sdk_v3.py``, ``training_v3.py``).

The launch contract is read from the files written by ``sdk_pipelines/v3.py`` in v3's format;
the user scripts are small plain-Python ones (no TensorFlow): each takes a second or two, the
MPI ones a few more (their job environment installs mpi4py from the code's requirements, as
v3's ``python -m mpi4py`` needs). Run: ``.venv/bin/pytest -q tests/pipeline/local/jobs/v3/test_training_v3.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from pipeline.local.hosts import mpi as local_mpi
from pipeline.local.jobs import failures as job_failures
from pipeline.local.jobs import launchers
from pipeline.local.jobs.v3 import sdk_v3, training_v3
from pipeline.local.jobs.v3.sdk_v3 import LaunchUndetermined, read_launch
from tests import readme_record
from tests.pipeline.local.helpers import BUCKET, put_objects
from tests.pipeline.local.sdk_pipelines import v3

needs_mpi = pytest.mark.skipif(local_mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed")
PREFIX = f"s3://{BUCKET}/v3-train/job-1"
TRAIN = f"s3://{BUCKET}/data/train"
OUTPUT = f"s3://{BUCKET}/v3-train"

# What a v3 job's script sees, as JSON in its output/data (one file per rank).
REPORT = """
    import json, os, pathlib, sys
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    names = ["SM_HPS", "SM_CHANNELS", "SM_ENTRY_SCRIPT", "SM_SOURCE_DIR", "SM_DISTRIBUTED_CONFIG",
             "SM_HOSTS", "SM_HOST_COUNT", "SM_CURRENT_HOST_RANK", "SM_MASTER_ADDR", "SM_MASTER_PORT",
             "SM_HP_BATCH_SIZE", "SM_CHANNEL_TRAIN", "SM_TRAINING_ENV", "SM_CURRENT_HOST",
             "OMPI_COMM_WORLD_SIZE", "SM_MODULE_DIR"]
    report = {"argv": sys.argv[1:], "cwd": os.getcwd(), "rank": rank,
              "env": {n: os.environ.get(n) for n in names},
              "mpi4py": "mpi4py" in sys.modules}
    out = pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"]) / f"report-{rank}.json"
    out.write_text(json.dumps(report))
    pathlib.Path(os.environ["SM_MODEL_DIR"], f"model-{rank}.txt").write_text("weights")
    print(f"metric-line rank={rank} score={0.5 + rank}")
"""


def reports(job_dir) -> list[dict]:
    found = [json.loads(p.read_text()) for p in job_dir.glob("hosts/*/output/data/report-*.json")]
    return sorted(found, key=lambda r: (r["env"]["SM_CURRENT_HOST"], r["rank"]))


def run_job(storage, tmp_path, *, code, source, distributed, instances=1, name="job", hps=None,
            environments=None, driver="auto", image=v3.TF_IMAGE):
    put_objects(storage, TRAIN, 2)
    code_uri, drivers_uri = v3.put_job_files(storage, f"{PREFIX}-{name}", code, source, distributed, driver)
    request = v3.training_arguments(code_uri, drivers_uri, output=OUTPUT, instances=instances, image=image,
                                    hyperparameters=hps or {"epochs": 2, "batch-size": 32, "name": "digits"},
                                    channels=[v3.channel("train", TRAIN)])
    job = training_v3.job_class(request)(request, name, storage, tmp_path / name, echo=False,
                                         environments=environments)
    return job.run()


# --- Reading the launch ----------------------------------------------------------------------
def test_the_launch_is_read_from_sourcecode_and_distributed_json():
    basic = read_launch(v3.source_code("train.py"), {}, v3.train_script("basic_script_driver.py"), "step")
    assert (basic.kind, basic.entry_script) == (sdk_v3.BASIC, "train.py")
    # A command wins over the entry script and the driver, as in v3's _prepare_train_script.
    command = read_launch(v3.source_code("train.py", command="python other.py", args=["--x", "a b"]),
                          v3.mpi(2), None, "step")
    assert sdk_v3.command_line(command) == ["/bin/bash", "-c", "python other.py --x 'a b'"]
    both = read_launch(v3.source_code("train.py"), v3.mpi(2, ["-x", "NCCL_DEBUG=INFO", "-np", "4"]), None, "s")
    assert (both.kind, both.process_count_per_node, both.mpi_options, both.np_option) == (
        sdk_v3.MPI, 2, ["-x", "NCCL_DEBUG=INFO"], 4)
    torch = read_launch(v3.source_code("train.py"), v3.torchrun(2), None, "s")
    assert torch.kind == sdk_v3.TORCHRUN
    # torchrun_driver.py on algo-2 of 2 (torchrun is torch.distributed.run's script)
    assert sdk_v3.torchrun_command("py", torch, ["algo-1", "algo-2"], "algo-2", ["--epochs", "2"]) == [
        "py", "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=2", "--master_addr=algo-1",
        "--master_port=7777", "--node_rank=1", "train.py", "--epochs", "2"]


@pytest.mark.parametrize("source, distributed, script, says", [
    ({}, {}, None, "no sourcecode.json"),
    (v3.source_code(None), {}, None, "names neither entry_script nor command"),
    (v3.source_code("train.py"), {"process_count_per_node": 2, "hosts_file": "x"}, None,
     "neither MPI's"),
    (v3.source_code("train.py"), v3.mpi(2), v3.train_script("my_driver.py"), "runs the driver my_driver.py"),
    (v3.source_code("train.ipynb"), {}, None, "neither .py nor .sh"),
    (v3.source_code("train.py"), v3.mpi(2, ["-np", "all"]), None, "is not a number of processes"),
])
def test_a_launch_that_cannot_be_determined_is_one_line_naming_the_step_and_the_fix(
        source, distributed, script, says):
    with pytest.raises(LaunchUndetermined) as error:
        read_launch(source, distributed, script, "step Train")
    text = str(error.value)
    assert text.startswith("step Train: ") and says in text and "\n" not in text


def test_arguments_and_environment_are_v3s():
    """hyperparameters_to_cli_args and environment.py, in the file's order."""
    assert sdk_v3.script_arguments({"batch-size": "32", "lr": "0.1", "name": "digits", "flags": '{"a": 1}'}) == [
        "--batch-size", "32", "--lr", "0.1", "--name", "digits", "--flags", '{"a": 1}']
    launch = read_launch(v3.source_code("train.py"), v3.mpi(2), None, "s")
    env = sdk_v3.environment(
        "/opt/ml", current_host="algo-2", hosts=["algo-2", "algo-1"], instance_type="ml.c5.xlarge",
        hyperparameters={"batch-size": "32"}, input_data_config={"train": {}, "code": {}},
        resource_config={"network_interface_name": "eth0"}, launch=launch, job_name="j", num_cpus=4)
    assert env["SM_HP_BATCH_SIZE"] == "32" and env["SM_HPS"] == '{"batch-size": 32}'
    assert env["SM_HOSTS"] == '["algo-1", "algo-2"]' and env["SM_CURRENT_HOST_RANK"] == "1"
    assert env["SM_CHANNEL_CODE"] == "/opt/ml/input/data/code" and env["SM_CHANNELS"] == '["train", "code"]'
    assert json.loads(env["SM_DISTRIBUTED_CONFIG"]) == v3.mpi(2)
    assert env["SM_MASTER_ADDR"] == "algo-1" and env["SM_MASTER_PORT"] == "7777"
    assert json.loads(env["SM_TRAINING_ENV"])["hyperparameters"] == {"batch-size": 32}


# --- The ranks SageMaker would start -----------------------------------------------------------
def display_map(*options: str) -> dict[str, int]:
    """Where Open MPI places ranks for v3's host list (mapped only: --do-not-launch)."""
    done = subprocess.run(["mpirun", "--allow-run-as-root", "--host", "algo-1:2,algo-2:2", "-np", "2",
                           *options, "--display-map", "--do-not-launch", "hostname"],
                          capture_output=True, text=True, timeout=60)
    return {node: int(count) for node, count in re.findall(
        r"Data for node: (\S+)\s+Num slots: \d+\s+Max slots: \d+\s+Num procs: (\d+)", done.stdout + done.stderr)}


@needs_mpi
def test_v3s_mpirun_puts_every_rank_on_algo_1_and_the_warnings_fix_spreads_them():
    """mpi_driver.py: ``mpirun --host algo-1:2,algo-2:2 -np 2``; the fix the warning names,
    mpi_additional_options=['-np', '4'], comes after it on the command line."""
    assert display_map() == {"algo-1": 2}
    assert display_map("-np", "4") == {"algo-1": 2, "algo-2": 2}
    warning = sdk_v3.rank_warning(read_launch(v3.source_code("t.py"), v3.mpi(2), None, "s"), 2)
    assert "SageMaker would start 2 MPI rank(s), not the 4 asked for" in warning
    assert "mpi_additional_options=['-np', '4']" in warning
    assert sdk_v3.rank_warning(read_launch(v3.source_code("t.py"), v3.mpi(2, ["-np", "4"]), None, "s"), 2) is None
    # No process_count_per_node: one rank per GPU of the instance type (ml.p3.8xlarge: 4).
    per_gpu = sdk_v3.rank_warning(read_launch(v3.source_code("t.py"), v3.mpi(None), None, "s"), 2, num_gpus=4)
    assert per_gpu.startswith("SageMaker would start 4 MPI rank(s), not the 8 asked for (2 instances x 4 per "
                              "instance, its GPUs)")


# --- Jobs ------------------------------------------------------------------------------------
def test_a_single_process_job_runs_its_entry_script_as_the_basic_driver_does(local_storage, tmp_path):
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed={})
    assert result.status == "Completed", result.failure_reason
    (report,) = reports(tmp_path / "job")
    assert report["argv"] == ["--batch-size", "32", "--epochs", "2", "--name", "digits"]
    assert report["cwd"].endswith("/input/data/code")
    env = report["env"]
    assert json.loads(env["SM_HPS"]) == {"batch-size": 32, "epochs": 2, "name": "digits"}
    assert json.loads(env["SM_CHANNELS"]) == ["train", "code", "sm_drivers"]
    assert env["SM_ENTRY_SCRIPT"] == "train.py" and env["SM_DISTRIBUTED_CONFIG"] is None
    assert env["SM_MODULE_DIR"] is None  # the v2 toolkit's variables are not v3's
    assert result.description["ModelArtifacts"]["S3ModelArtifacts"] == f"{OUTPUT}/job/output/model.tar.gz"


def test_a_command_runs_through_bash_with_its_args_and_no_hyperparameters(local_storage, tmp_path):
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT},
                     source=v3.source_code(command="python train.py", args=["--tag", "a b"]), distributed={})
    assert result.status == "Completed", result.failure_reason
    assert reports(tmp_path / "job")[0]["argv"] == ["--tag", "a b"]


def test_a_job_whose_sm_drivers_name_a_driver_of_its_own_is_refused_before_it_starts(local_storage, tmp_path):
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed=v3.mpi(2), driver="my_driver.py")
    assert result.status == "Failed" and result.failure_type == job_failures.CLIENT_ERROR
    assert "runs the driver my_driver.py" in result.failure_reason
    assert not list((tmp_path / "job").glob("logs/*.log"))  # no process started


def test_torchrun_on_a_tensorflow_image_is_refused_naming_the_image(local_storage, tmp_path):
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed=v3.torchrun(1))
    assert result.status == "Failed" and result.failure_type == job_failures.CLIENT_ERROR
    assert "has none (record aws-tensorflow-training-2.14)" in result.failure_reason
    readme_record.record(result.failure_reason)


def test_torchrun_runs_only_where_pytorch_is_importable(local_storage, tmp_path):
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed=v3.torchrun(1), image=v3.TORCH_IMAGE)
    if launchers.torch_importable(sys.executable):
        assert result.status == "Completed", result.failure_reason
    else:
        assert result.status == "Failed" and result.failure_type == job_failures.CLIENT_ERROR
        assert result.failure_reason.startswith("distributed=Torchrun(...) runs torchrun, which needs PyTorch")
        assert "\n" not in result.failure_reason
        readme_record.record(result.failure_reason)


@needs_mpi
def test_mpi_on_an_image_without_mpi4py_is_refused_before_the_ranks_start(local_storage, tmp_path):
    """v3's MPI driver runs `python -m mpi4py`: the SKLearn image has no mpi4py, and the code's
    requirements install none."""
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed=v3.mpi(1), image=v3.SKLEARN_IMAGE)
    assert result.status == "Failed" and result.failure_type == job_failures.CLIENT_ERROR
    assert "and the image 683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3 " \
           "has none either: add mpi4py to SourceCode(requirements=...)" in result.failure_reason
    assert not list((tmp_path / "job").glob("logs/*rank*.log"))
    readme_record.record(result.failure_reason)


@needs_mpi
def test_mpi_runs_the_ranks_sagemaker_would_start_and_warns_first(local_storage, tmp_path):
    """2 instances x process_count_per_node=2: v3 starts 2 ranks, both on algo-1; with the
    warning's fix, 4 ranks, 2 per host. One job environment (mpi4py from the requirements)."""
    code = {"train.py": REPORT, "requirements.txt": "mpi4py\n"}
    source = v3.source_code("train.py", requirements="requirements.txt")
    environments = tmp_path / "environments"
    as_v3 = run_job(local_storage, tmp_path, code=code, source=source, distributed=v3.mpi(2), instances=2,
                    name="asis", environments=environments)
    assert as_v3.status == "Completed", as_v3.failure_reason
    ranks = reports(tmp_path / "asis")
    assert [(r["rank"], r["env"]["SM_CURRENT_HOST"], r["env"]["OMPI_COMM_WORLD_SIZE"]) for r in ranks] == [
        (0, "algo-1", "2"), (1, "algo-1", "2")]
    assert all(r["mpi4py"] for r in ranks)  # run as `python -m mpi4py train.py`
    log = (tmp_path / "asis" / "job.log").read_text()
    warning = next(line for line in log.splitlines() if "warning: SageMaker would start" in line)
    assert log.index(warning) < log.index("mpirun: ")  # said before the ranks start
    assert as_v3.warnings and as_v3.warnings[0].startswith("SageMaker would start 2 MPI rank(s)")
    readme_record.record(as_v3.warnings[0])

    fixed = run_job(local_storage, tmp_path, code=code, source=source, distributed=v3.mpi(2, ["-np", "4"]),
                    instances=2, name="fixed", environments=environments)
    assert fixed.status == "Completed", fixed.failure_reason
    assert [(r["rank"], r["env"]["SM_CURRENT_HOST"]) for r in reports(tmp_path / "fixed")] == [
        (0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")]
    assert not fixed.warnings


def test_a_source_dir_archive_is_unpacked_in_the_code_folder(local_storage, tmp_path):
    """SourceCode(source_dir="code.tar.gz"): v3's sm_train.sh runs `tar -xzf code.tar.gz` in
    the code channel before the driver."""
    from tests.pipeline.local.helpers import sourcedir

    put_objects(local_storage, TRAIN, 1)
    source = v3.source_code("train.py", source_dir="src/code.tar.gz")
    code_uri, drivers_uri = v3.put_job_files(local_storage, f"{PREFIX}-tar", {}, source, {})
    local_storage.put_bytes(sourcedir({"train.py": REPORT}), f"{code_uri}/code.tar.gz")
    request = v3.training_arguments(code_uri, drivers_uri, output=OUTPUT, channels=[v3.channel("train", TRAIN)])
    result = training_v3.job_class(request)(request, "job", local_storage, tmp_path / "job", echo=False).run()
    assert result.status == "Completed", result.failure_reason
    assert reports(tmp_path / "job")[0]["cwd"].endswith("/input/data/code")


def test_an_np_beyond_v3s_slots_is_refused_before_any_rank_starts(local_storage, tmp_path):
    """v3's mpirun lists algo-1:P,... with no --oversubscribe: more ranks than slots fail there."""
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed=v3.mpi(2, ["-np", "8"]), instances=2)
    assert result.status == "Failed" and result.failure_type == job_failures.CLIENT_ERROR
    assert "ask for -np 8, more than the 4 slots v3's mpirun lists" in result.failure_reason
    assert not list((tmp_path / "job").glob("logs/*.log"))


def test_the_basic_driver_runs_the_script_on_every_instance(local_storage, tmp_path):
    """sm_train.sh runs on every host, and with no distributed driver each runs the script."""
    result = run_job(local_storage, tmp_path, code={"train.py": REPORT}, source=v3.source_code("train.py"),
                     distributed={}, instances=2)
    assert result.status == "Completed", result.failure_reason
    assert [(r["env"]["SM_CURRENT_HOST"], r["env"]["SM_CURRENT_HOST_RANK"], r["env"]["SM_HOST_COUNT"])
            for r in reports(tmp_path / "job")] == [("algo-1", "0", "2"), ("algo-2", "1", "2")]
