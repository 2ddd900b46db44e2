"""Training jobs as local processes, with small plain-Python user scripts.

These start real processes (and real mpirun for the MPI cases) but no TensorFlow, so each
takes a second or two. The TensorFlow/Horovod runs are in test_end_to_end.py (slow).
"""

from __future__ import annotations

import json
import tarfile
import time

import pytest

from pipeline.local.hosts import mpi, namespaces
from pipeline.local.jobs import failures as job_failures
from pipeline.local.jobs import lifecycle
from pipeline.local.jobs.training import TrainingJob
from tests import readme_record
from tests.pipeline.local.helpers import (
    BUCKET,
    REPORT_SCRIPT,
    channel,
    leftover_processes,
    put_code,
    put_objects,
    reports,
    training_request,
)

needs_mpi = pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed")
NAMESPACES = namespaces.unavailable_reason() is None
CODE = f"s3://{BUCKET}/code/sourcedir.tar.gz"
TRAIN = f"s3://{BUCKET}/data/train"
METRIC = {"Name": "score", "Regex": r"metric-line.* score=([0-9.]+)"}


def run_training(storage, tmp_path, request, name="job"):
    job = TrainingJob(request, name, storage, tmp_path / name, echo=False)
    return job.run()


def test_file_channels_sharded_over_two_hosts_without_mpi(storage, tmp_path):
    local_storage = storage  # either store: the local directory or S3 through boto3
    put_code(local_storage, CODE, {"user.py": REPORT_SCRIPT})
    put_objects(local_storage, TRAIN, 4)
    request = training_request(CODE, instances=2, hyperparameters={"epochs": 1, "lr": 0.1},
                               channels=[channel("train", TRAIN, "File", "ShardedByS3Key")],
                               metrics=[METRIC])
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    by_host = {r["host"]: r for r in reports(tmp_path / "job")}
    assert by_host["algo-1"]["seen"]["train"] == ["part-000.txt", "part-002.txt"]
    assert by_host["algo-2"]["seen"]["train"] == ["part-001.txt", "part-003.txt"]
    assert by_host["algo-2"]["argv"] == ["--epochs", "1", "--lr", "0.1"]
    assert by_host["algo-2"]["resourceconfig"]["current_host"] == "algo-2"
    if NAMESPACES:  # SageMaker: each host's own /opt/ml, its own hostname
        assert by_host["algo-1"]["cwd"] == "/opt/ml/code"
        assert [(r["hostname"], r["opt_ml_current_host"]) for r in by_host.values()] == [
            ("algo-1", "algo-1"), ("algo-2", "algo-2")]
    else:
        assert by_host["algo-1"]["cwd"] == str(tmp_path / "job" / "hosts" / "algo-1" / "code")
    # SageMaker: <S3OutputPath>/<job>/output/model.tar.gz, from the first host.
    model = result.description["ModelArtifacts"]["S3ModelArtifacts"]
    assert model == f"s3://{BUCKET}/out/job/output/model.tar.gz"
    local_storage.get_file(model, tmp_path / "model.tar.gz")
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        assert tar.getnames() == ["model-algo-1-0.txt"]
    assert result.description["FinalMetricDataList"][0]["MetricName"] == "score"
    assert [p["value"] for p in result.metrics["score"]] == [0.5, 0.5]
    log = (tmp_path / "job" / "job.log").read_text()
    assert "[algo-2] metric-line epoch=1 score=0.5" in log


@pytest.fixture(params=["namespaces", "relocated"])
def isolation(request, monkeypatch):
    """Both ways a host gets its /opt/ml: its own namespaces, or relocated paths."""
    if request.param == "namespaces" and not NAMESPACES:
        pytest.skip(f"no namespaces here: {namespaces.unavailable_reason()}")
    if request.param == "relocated":
        monkeypatch.setenv(namespaces.SWITCH_ENV, "0")
        # REPORT_SCRIPT reads /opt/ml only where it exists (to report a namespace's view).
        monkeypatch.setenv(lifecycle.OPT_ML_CHECK_ENV, "0")
    return request.param


@needs_mpi
def test_mpi_ranks_group_by_simulated_host_and_pipe_is_per_host(storage, tmp_path, isolation):
    local_storage = storage  # either store: Pipe streams from the local store or from S3
    put_code(local_storage, CODE, {"user.py": REPORT_SCRIPT})
    put_objects(local_storage, TRAIN, 4)
    request = training_request(
        CODE, instances=2, mpi_processes=2, hyperparameters={"epochs": 2},
        channels=[channel("train", TRAIN, "Pipe", "ShardedByS3Key")], metrics=[METRIC])
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    ranks = sorted(reports(tmp_path / "job"), key=lambda r: r["rank"])
    # Horovod: local rank / size are per simulated host, ranks fill algo-1 first.
    assert [(r["rank"], r["host"], r["local_rank"], r["local_size"], r["size"]) for r in ranks] == [
        (0, "algo-1", 0, 2, 4), (1, "algo-1", 1, 2, 4), (2, "algo-2", 0, 2, 4), (3, "algo-2", 1, 2, 4)]
    if isolation == "namespaces":  # every rank sees its host's /opt/ml and name, as in the container
        assert [(r["hostname"], r["opt_ml_current_host"]) for r in ranks] == [
            (r["host"], r["host"]) for r in ranks]
    # Pipe + ShardedByS3Key: each host's pipe carries its objects in key order, every epoch.
    assert ranks[0]["seen"]["train"] == ["object 0\nobject 2\n"] * 2
    assert ranks[2]["seen"]["train"] == ["object 1\nobject 3\n"] * 2
    assert not list((tmp_path / "job").glob("hosts/*/input/data/train_*")), "FIFOs left behind"
    log = (tmp_path / "job" / "job.log").read_text()
    assert "[algo-2 rank 3] metric-line epoch=1 score=3.5" in log
    assert sorted(p["value"] for p in result.metrics["score"]) == [0.5, 1.5, 2.5, 3.5]


def test_network_isolation_code_channel(local_storage, tmp_path):
    """SageMaker with network isolation: code arrives as the `code` channel and
    sagemaker_submit_directory names the archive inside the container."""
    put_code(local_storage, CODE, {"user.py": REPORT_SCRIPT})
    put_objects(local_storage, TRAIN, 1)
    request = training_request("/opt/ml/input/data/code/sourcedir.tar.gz",
                               channels=[channel("train", TRAIN), channel("code", CODE, mode=None)])
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    assert reports(tmp_path / "job")[0]["seen"]["code"] == ["sourcedir.tar.gz"]


FAILING_RANK = """
    import os, pathlib, sys, time
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    if rank == 1:
        time.sleep(1)   # mid-epoch
        pathlib.Path(os.environ["SM_OUTPUT_DIR"], "failure").write_text("rank 1: loss became NaN at step 7")
        sys.exit(3)
    print("rank 0 waits in an allreduce that never completes", flush=True)
    time.sleep(600)
"""


@needs_mpi
def test_a_crashing_rank_fails_the_job_fast_with_its_reason_and_leaves_nothing(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": FAILING_RANK})
    put_objects(local_storage, TRAIN, 2)
    request = training_request(CODE, instances=2, mpi_processes=1,
                               channels=[channel("train", TRAIN, "Pipe", "ShardedByS3Key")])
    started = time.monotonic()
    result = run_training(local_storage, tmp_path, request)
    assert time.monotonic() - started < 60
    assert result.status == "Failed"
    assert result.failure_type == job_failures.ALGORITHM_ERROR
    assert result.failure_reason == (
        "AlgorithmError: rank 1 on algo-2 exited with code 3: rank 1: loss became NaN at step 7")
    assert result.description["FailureReason"] == result.failure_reason
    assert leftover_processes(str(tmp_path)) == []
    assert not list((tmp_path / "job").glob("hosts/*/input/data/train_*"))


KILLED = """
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)   # what the kernel's OOM killer does
"""


def test_a_process_killed_from_outside_is_an_internal_error(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": KILLED})
    result = run_training(local_storage, tmp_path, training_request(CODE))
    assert result.status == "Failed"
    assert result.failure_type == job_failures.INTERNAL_ERROR
    assert "algo-1 was killed by signal 9 (SIGKILL)" in result.failure_reason


@needs_mpi
def test_a_rank_killed_under_mpi_is_an_internal_error(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": KILLED})
    result = run_training(local_storage, tmp_path, training_request(CODE, mpi_processes=2))
    assert result.failure_type == job_failures.INTERNAL_ERROR
    assert "killed by signal 9 (SIGKILL)" in result.failure_reason


def test_a_script_error_without_failure_file_reports_its_last_line(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": "raise ValueError('bad batch size 0')\n"})
    result = run_training(local_storage, tmp_path, training_request(CODE))
    assert result.failure_type == job_failures.ALGORITHM_ERROR
    assert result.failure_reason == "AlgorithmError: algo-1 exited with code 1: ValueError: bad batch size 0"


CHECKPOINTING = """
    import os, pathlib
    ckpt = pathlib.Path("/opt/ml/checkpoints".replace("/opt/ml", os.environ["SAGEMAKER_BASE_DIR"]))
    runs = ckpt / "runs.txt"
    count = int(runs.read_text()) if runs.exists() else 0
    runs.write_text(str(count + 1))
    print(f"resumed-from={count}")
"""


def test_checkpoints_are_restored_and_synced_so_a_rerun_resumes(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": CHECKPOINTING})
    request = training_request(CODE, instances=2, checkpoint_uri=f"s3://{BUCKET}/ckpt/run-1",
                               metrics=[{"Name": "resumed", "Regex": "resumed-from=([0-9]+)"}])
    first = run_training(local_storage, tmp_path, request, "first")
    second = run_training(local_storage, tmp_path, request, "second")
    assert [p["value"] for p in first.metrics["resumed"]] == [0, 0]
    assert [p["value"] for p in second.metrics["resumed"]] == [1, 1]
    assert local_storage.read_bytes(f"s3://{BUCKET}/ckpt/run-1/runs.txt") == b"2"


def test_bad_channels_fail_before_any_process_starts(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": "open('/must/not/run', 'w')\n"})
    put_objects(local_storage, TRAIN, 1)
    sharded = training_request(CODE, instances=2, channels=[channel("train", TRAIN, "File", "ShardedByS3Key")])
    result = run_training(local_storage, tmp_path, sharded, "sharded")
    assert result.failure_type == job_failures.CLIENT_ERROR
    assert "channel 'train': ShardedByS3Key over 2 instances needs at least 2 objects" in result.failure_reason
    empty = training_request(CODE, channels=[channel("train", f"s3://{BUCKET}/none/")])
    assert "channel 'train': no objects under" in run_training(local_storage, tmp_path, empty, "empty").failure_reason
    malformed = training_request(CODE, channels=[channel("train", "s3:/bucket/x")])
    assert "is not an s3:// URI" in run_training(local_storage, tmp_path, malformed, "bad").failure_reason
    assert not list(tmp_path.glob("*/logs/*.log"))


def test_max_runtime_stops_the_job(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": "import time\ntime.sleep(60)\n"})
    started = time.monotonic()
    result = run_training(local_storage, tmp_path, training_request(CODE, max_run=1))
    assert time.monotonic() - started < 20
    assert result.failure_reason.startswith("MaxRuntimeExceeded")
    assert leftover_processes(str(tmp_path)) == []


@needs_mpi
def test_local_launch_defaults_apply_and_the_users_settings_win(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": "import os\nprint('threads=' + os.environ['OMP_NUM_THREADS'], "
                                              "'cycle=' + os.environ.get('HOROVOD_CYCLE_TIME', '-'))\n"})
    request = training_request(CODE, instances=2, mpi_processes=1,
                               mpi_options="-x HOROVOD_CYCLE_TIME=5",
                               metrics=[{"Name": "threads", "Regex": "threads=([0-9]+)"}])
    request["Environment"] = {"OMP_NUM_THREADS": "3"}
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    # The request's Environment wins over the launch default (the specs are gone by now:
    # what the ranks saw is what counts).
    assert [p["value"] for p in result.metrics["threads"]] == [3, 3]
    log = (tmp_path / "job" / "job.log").read_text()  # the mpirun command line is logged
    # Exported by custom_mpi_options, not overridden by the runner's default in the spec.
    assert log.count("cycle=5") == 2
    assert "-mca mpi_yield_when_idle 1 -x HOROVOD_CYCLE_TIME=5" in log


def test_a_sourcedir_with_a_link_out_is_the_jobs_client_error_and_extracts_nothing(tmp_path):
    from pipeline.local.jobs.training import extract_sourcedir

    archive = tmp_path / "sourcedir.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        tar.addfile(info)
        link = tarfile.TarInfo("data")
        link.type, link.linkname = tarfile.SYMTYPE, "../../.."
        tar.addfile(link)
    with pytest.raises(job_failures.JobFailure, match=r"member 'data' is a symbolic link \(-> '\.\./\.\./\.\.'\)") as info:
        extract_sourcedir(archive, tmp_path / "code")
    assert info.value.failure_type == job_failures.CLIENT_ERROR
    assert list((tmp_path / "code").iterdir()) == []


FAKE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEXAMPLEsessiontoken",
    "GITHUB_TOKEN": "ghp_fakeFAKEfake0123456789abcdefABCDEF",
    "TF_MY_API_KEY": "tf-prefixed-but-a-key-0123456789",  # an allowed prefix, a secret's name
}
# Writes its whole environment into the job tree (output data and model), as a careless
# script would, then succeeds or fails.
ENV_DUMP = """
    import json, os, pathlib, sys
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    for folder in (os.environ["SM_OUTPUT_DATA_DIR"], os.environ["SM_MODEL_DIR"]):
        pathlib.Path(folder, f"env-{rank}.json").write_text(json.dumps(dict(os.environ)))
    print(json.dumps(dict(os.environ)), flush=True)
    sys.exit(int(os.environ["SM_HP_EXIT"]))
"""


@needs_mpi
@pytest.mark.parametrize("exit_code", [0, 1])
def test_no_credential_of_the_runner_reaches_a_job_or_any_file_of_it(
        local_storage, tmp_path, monkeypatch, exit_code):
    for name, value in FAKE_SECRETS.items():
        monkeypatch.setenv(name, value)
    put_code(local_storage, CODE, {"user.py": ENV_DUMP})
    put_objects(local_storage, TRAIN, 2)
    request = training_request(CODE, instances=2, mpi_processes=1, hyperparameters={"exit": exit_code},
                               channels=[channel("train", TRAIN)])
    request["Environment"] = {"MY_SETTING": "from-the-request"}
    result = run_training(local_storage, tmp_path, request)
    assert result.status == ("Completed" if exit_code == 0 else "Failed"), result.failure_reason
    dumps = list((tmp_path / "job").glob("hosts/*/output/data/env-*.json"))
    assert len(dumps) == 2
    env = json.loads(dumps[0].read_text())
    # What SageMaker would give: the request's Environment, the contract's variables.
    assert env["MY_SETTING"] == "from-the-request" and env["SM_CURRENT_HOST"].startswith("algo-")
    assert not set(FAKE_SECRETS) & set(env)
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()
             and any(v.encode() in p.read_bytes() for v in FAKE_SECRETS.values())]
    assert leaks == []
    assert not (tmp_path / "job" / "mpi" / "launch").exists()  # short-lived


def test_launch_specs_are_private(tmp_path):
    launch = mpi.prepare(tmp_path / "mpi", ["algo-1"], 1,
                         {"algo-1": {"env": {"A": "b"}, "cwd": "/", "argv": ["true"], "log": "x"}})
    try:
        assert launch.launch_dir.stat().st_mode & 0o777 == 0o700
        assert (launch.launch_dir / "algo-1.json").stat().st_mode & 0o777 == 0o600
        mpi.remove_specs(launch)
        assert not launch.launch_dir.exists()
    finally:
        import shutil

        shutil.rmtree(launch.scratch, ignore_errors=True)


def test_a_shell_entry_point_gets_each_hyperparameter_as_one_quoted_word(local_storage, tmp_path):
    script = '#!/bin/sh\nfor a in "$@"; do printf "<%s>\\n" "$a"; done > "$SM_OUTPUT_DATA_DIR/args.txt"\n'
    put_code(local_storage, CODE, {"run.sh": script})
    put_objects(local_storage, TRAIN, 1)
    hostile = "a b; touch PWNED; $(touch PWNED2) `touch PWNED3`"
    request = training_request(CODE, program="run.sh", hyperparameters={"msg": hostile, "count": 2},
                               channels=[channel("train", TRAIN)])
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    args = next((tmp_path / "job").glob("hosts/algo-1/output/data/args.txt")).read_text().splitlines()
    assert sorted(args) == sorted(["<--msg>", f"<{hostile}>", "<--count>", "<2>"])
    assert not list(tmp_path.rglob("PWNED*"))


def test_a_training_step_without_sagemaker_program_is_the_jobs_failure_reason(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": REPORT_SCRIPT})
    put_objects(local_storage, TRAIN, 1)
    request = training_request(CODE, channels=[channel("train", TRAIN)])
    del request["HyperParameters"]["sagemaker_program"]
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Failed"
    assert result.failure_type == job_failures.CLIENT_ERROR
    assert result.failure_reason.startswith("hyperparameter sagemaker_program is missing")
    description = json.loads((tmp_path / "job" / "description.json").read_text())
    assert description["FailureReason"] == result.failure_reason
    assert (tmp_path / "job" / "metrics.json").is_file()
    assert not list((tmp_path / "job").glob("hosts/*/input/data/train/*"))  # refused before staging


def test_any_error_inside_a_job_ends_it_failed_with_a_reason_and_its_records(local_storage, tmp_path,
                                                                          monkeypatch):
    put_code(local_storage, CODE, {"user.py": REPORT_SCRIPT})
    put_objects(local_storage, TRAIN, 1)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the runner")

    monkeypatch.setattr("pipeline.local.jobs.contract.write_training_tree", broken)
    result = run_training(local_storage, tmp_path, training_request(CODE, channels=[channel("train", TRAIN)]))
    assert result.status == "Failed"
    assert result.failure_reason == "InternalServerError: RuntimeError: a bug in the runner"
    assert json.loads((tmp_path / "job" / "description.json").read_text())["FailureReason"] == result.failure_reason
    assert (tmp_path / "job" / "metrics.json").is_file()
    assert "Traceback" in (tmp_path / "job" / "job.log").read_text()


# What the toolkit's to_env_vars makes of a hyperparameter (SM_HP_ + the key upper-cased,
# hyphens kept; a string raw, anything else compact JSON): mapping.py#L30-L62 and
# environment.py#L1046-L1049 of https://github.com/aws/sagemaker-training-toolkit/blob/3383937/src/sagemaker_training/
# (5.1.4 installed in a throwaway venv gives the same for these, see issue 27's note).
def toolkit_hp_variables(hyperparameters: dict) -> dict:
    return {f"SM_HP_{k.upper()}": v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))
            for k, v in hyperparameters.items()}


# Reports its environment, HOME and whether the runner's credentials file is readable; writes
# a model only when asked.
HOME_AND_HPS = """
    import json, os, pathlib
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ["SM_CURRENT_HOST"])
    credentials = pathlib.Path("~/.aws/credentials").expanduser()
    report = {"env": dict(os.environ), "home": os.path.expanduser("~"),
              "credentials": credentials.read_text() if credentials.exists() else None}
    pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"], f"report-{rank}.json").write_text(json.dumps(report))
    if os.environ.get("SM_HP_WRITE-MODEL") == "true":
        pathlib.Path(os.environ["SM_MODEL_DIR"], "weights.txt").write_text("w")
"""


@pytest.fixture
def runner_home(tmp_path, monkeypatch):
    """The runner's HOME holds credentials; TF_CONFIG is set where the runner runs."""
    home = tmp_path / "runner-home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = not-for-jobs\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["localhost:1"]}, "task": {"index": 0}}')
    return home


@needs_mpi
@pytest.mark.parametrize("mpi_processes", [1, None], ids=["mpi-2x1", "no-mpi"])
def test_hyphenated_hyperparameters_reach_every_rank_and_home_is_the_jobs(
        local_storage, tmp_path, runner_home, mpi_processes):
    put_code(local_storage, CODE, {"user.py": HOME_AND_HPS})
    hyperparameters = {"learning-rate": 0.01, "write-model": True, "layers": [64, 32]}
    request = training_request(CODE, instances=2, mpi_processes=mpi_processes, hyperparameters=hyperparameters)
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    found = sorted((tmp_path / "job").glob("hosts/*/output/data/report-*.json"))
    assert len(found) == 2
    for path in found:
        report = json.loads(path.read_text())
        expected = toolkit_hp_variables(hyperparameters)
        assert {k: report["env"].get(k) for k in expected} == expected
        assert expected["SM_HP_LEARNING-RATE"] == "0.01"
        host = report["env"]["SM_CURRENT_HOST"]
        # SageMaker: HOME is the image's, empty of the caller's; TF_CONFIG never leaks.
        assert report["home"] == str(tmp_path / "job" / "home" / host)
        assert report["credentials"] is None and "TF_CONFIG" not in report["env"]
    assert result.warnings == []


def test_the_jobs_records_are_private_and_an_empty_model_is_said(local_storage, tmp_path):
    put_code(local_storage, CODE, {"user.py": HOME_AND_HPS})
    request = training_request(CODE, hyperparameters={"write-model": False})
    request["Environment"] = {"DB_PASSWORD": "hunter2"}
    result = run_training(local_storage, tmp_path, request)
    assert result.status == "Completed", result.failure_reason
    job = tmp_path / "job"
    assert job.stat().st_mode & 0o777 == 0o700
    for name in ("request.json", "description.json"):
        assert (job / name).stat().st_mode & 0o777 == 0o600, name
    readme_record.record(result.warnings[0] if result.warnings else None)
    assert result.warnings == ["the model is empty: nothing was written to /opt/ml/model (SM_MODEL_DIR) on algo-1"]
    last = (job / "job.log").read_text().strip().splitlines()[-1]
    assert "Completed in" in last and "(warning: the model is empty" in last


LINKING_SCRIPT = """
import os, sys
model = os.environ["SM_MODEL_DIR"]
open(os.path.join(model, "weights.txt"), "w").write("w")
os.symlink("weights.txt", os.path.join(model, "same-weights.txt"))  # inside: packed as a file
os.symlink(sys.argv[sys.argv.index("--secret") + 1], os.path.join(model, "key"))
"""


def test_a_link_out_of_the_model_folder_fails_the_job_and_packs_nothing_of_it(local_storage, tmp_path):
    """The model is packed outside the job's namespace: a link out of model/ would be followed
    on the runner's own file system (the owner's SSH key, say)."""
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    put_code(local_storage, CODE, {"user.py": LINKING_SCRIPT})
    result = run_training(local_storage, tmp_path, training_request(CODE, hyperparameters={"secret": str(secret)}))
    readme_record.record(result.failure_reason)
    assert result.status == "Failed"
    assert result.failure_type == job_failures.CLIENT_ERROR
    assert result.failure_reason == (
        f"model/key is a link to {secret}, outside the folder; the local runner packs "
        "only what is in it (SageMaker's container cannot reach this machine's files): copy the file "
        "into the folder instead of linking it")
    assert not local_storage.list(f"s3://{BUCKET}/out/job/")  # nothing uploaded
    assert not any("PRIVATE KEY" in p.read_text(errors="replace")
                   for p in (tmp_path / "job").rglob("*") if p.is_file() and not p.is_symlink()
                   and p.suffix != ".gz")


def test_a_link_inside_the_model_folder_is_packed_as_the_file(tmp_path):
    from pipeline.local.jobs.training import pack_directory

    model = tmp_path / "model"
    (model / "1").mkdir(parents=True)
    (model / "1" / "saved_model.pb").write_bytes(b"pb")
    (model / "latest").symlink_to("1", target_is_directory=True)
    (model / "copy.pb").symlink_to("1/saved_model.pb")
    pack_directory(model, tmp_path / "model.tar.gz")
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        assert {m.name: m.type for m in tar} == {
            "1": tarfile.DIRTYPE, "1/saved_model.pb": tarfile.REGTYPE, "copy.pb": tarfile.REGTYPE,
            "latest": tarfile.DIRTYPE, "latest/saved_model.pb": tarfile.REGTYPE}
