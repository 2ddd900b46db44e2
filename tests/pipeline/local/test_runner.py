"""Whole executions of a small definition (the SDK's JSON shapes, plain-Python steps):
branches, FailStep, registration, step caching, retry policies, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.local.hosts.processes import tagged_pids
from pipeline.local.runner import PipelineRunner, RunOptions
from pipeline.local.store.registry import Registry

from .helpers import (
    BUCKET,
    leftover_processes,
    processing_output,
    processing_request,
    put_code,
    put_script,
    training_request,
)

CODE = f"s3://{BUCKET}/code/proc/"
TRAIN_CODE = f"s3://{BUCKET}/code/train/sourcedir.tar.gz"

MAKE = """
    import json, os, pathlib, sys
    out = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"]) / "processing/output/result"
    (out / "report.json").write_text(json.dumps({"metrics": {"score": {"value": float(sys.argv[2])}}}))
    (out / "data.txt").write_text("training data")
"""

TRAIN = """
    import os, pathlib, signal, sys, time
    base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
    marker = base / "checkpoints" / "attempted"
    mode = os.environ.get("SM_HP_MODE", "ok")
    print("training started", flush=True)
    if mode == "die-once" and not marker.exists():
        marker.write_text("1")      # synced to the checkpoint URI even though the job dies
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "error":
        sys.exit("a bug in the script")
    if mode == "one-rank-dies" and os.environ.get("RANK") == "3":
        sys.exit("rank 3 crashed")
    if mode in ("sleep", "one-rank-dies"):
        time.sleep(120)
    if mode in ("save-on-stop", "ignore-stop"):  # a stopped job's grace (lifecycle.let_scripts_end)
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
        while mode == "ignore-stop" or not stopping:
            time.sleep(0.05)
        (base / "model" / "weights.txt").write_text("saved on SIGTERM")
        print("stopped (SIGTERM): saving the model trained so far", flush=True)
        sys.exit(0)
    assert (base / "input/data/train/data.txt").read_text() == "training data"
    (base / "model" / "weights.txt").write_text("w")
    print("score=0.75")
"""


def step_definition(mode="ok", retry=None):
    join_out = {"Std:Join": {"On": "/", "Values": [f"s3://{BUCKET}/runs", {"Get": "Execution.PipelineExecutionId"},
                                                   "Make", "result"]}}
    make_args = processing_request(
        CODE, "make.py",
        outputs=[processing_output("result", join_out, "/opt/ml/processing/output/result")],
        arguments=["--score", {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.Score"}]}}])
    train_args = training_request(
        TRAIN_CODE, program="train.py", hyperparameters={"mode": mode},
        channels=[{"ChannelName": "train", "InputMode": "File", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3DataDistributionType": "FullyReplicated",
            "S3Uri": {"Get": "Steps.Make.ProcessingOutputConfig.Outputs['result'].S3Output.S3Uri"}}}}],
        checkpoint_uri={"Std:Join": {"On": "/", "Values": [f"s3://{BUCKET}/ckpt",
                                                          {"Get": "Execution.PipelineExecutionId"}]}},
        metrics=[{"Name": "score", "Regex": "score=([0-9.]+)"}])
    score = {"Std:JsonGet": {"PropertyFile": {"Get": "Steps.Make.PropertyFiles.Report"},
                             "Path": "metrics.score.value"}}
    cache = {"Enabled": True, "ExpireAfter": "PT1H"}
    train = {"Name": "Train", "Type": "Training", "Arguments": train_args, "CacheConfig": cache}
    if retry:
        train["RetryPolicies"] = retry
    return {
        "Version": "2020-12-01",
        "Parameters": [{"Name": "Score", "Type": "Float", "DefaultValue": 0.8},
                       {"Name": "Threshold", "Type": "Float", "DefaultValue": 0.5}],
        "Steps": [
            {"Name": "Make", "Type": "Processing", "Arguments": make_args, "CacheConfig": cache,
             "PropertyFiles": [{"PropertyFileName": "Report", "OutputName": "result", "FilePath": "report.json"}]},
            train,
            {"Name": "Check", "Type": "Condition", "Arguments": {
                "Conditions": [{"Type": "GreaterThanOrEqualTo", "LeftValue": score,
                                "RightValue": {"Get": "Parameters.Threshold"}}],
                "IfSteps": [{"Name": "Register", "Type": "RegisterModel", "Arguments": {
                    "ModelPackageGroupName": "group",
                    "ModelApprovalStatus": "Approved",
                    "InferenceSpecification": {"Containers": [{"Image": "img", "ModelDataUrl": {
                        "Get": "Steps.Train.ModelArtifacts.S3ModelArtifacts"}}]},
                    "ModelMetrics": {"ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": {
                        "Std:Join": {"On": "/", "Values": [
                            {"Get": "Steps.Make.ProcessingOutputConfig.Outputs['result'].S3Output.S3Uri"},
                            "report.json"]}}}}}}}],
                "ElseSteps": [{"Name": "TooLow", "Type": "Fail", "Arguments": {"ErrorMessage": {
                    "Std:Join": {"On": "", "Values": ["score ", score, " is below ",
                                                      {"Get": "Parameters.Threshold"}]}}}}],
            }},
        ],
    }


@pytest.fixture
def code(local_storage):
    put_script(local_storage, CODE, "make.py", MAKE)
    put_code(local_storage, TRAIN_CODE, {"train.py": TRAIN})
    return local_storage


@pytest.fixture
def any_code(storage):
    """The step code in either store: the local directory or S3 through boto3 (moto)."""
    put_script(storage, CODE, "make.py", MAKE)
    put_code(storage, TRAIN_CODE, {"train.py": TRAIN})
    return storage


class Capture:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def run(storage, workdir, definition, parameters=None, sleep=None):
    out = Capture()
    options = RunOptions(workdir=workdir, storage=storage, echo=False, stream=out,
                         execution_parameters=parameters or {}, sleep=sleep or (lambda s: None))
    record = PipelineRunner(definition, "testpipe", options).run()
    return record, out.text


def test_success_registers_and_a_rerun_is_served_from_the_cache(any_code, tmp_path):
    code = any_code
    record, _ = run(code, tmp_path, step_definition())
    assert record.status == "Succeeded", record.failure_reason
    statuses = {s.name: s.status for s in record.steps}
    assert statuses == {"Make": "Succeeded", "Train": "Succeeded", "Check": "Succeeded",
                        "Register": "Succeeded", "TooLow": "NotExecuted"}
    assert record.step("Train").metrics == {"score": 0.75}
    assert record.step("Check").properties == {"Outcome": True}
    package = Registry(tmp_path / "registry.sqlite").list()[0]
    assert (package.group, package.version, package.approval_status) == ("group", 1, "Approved")
    assert package.metrics == {"metrics": {"score": {"value": 0.8}}}
    assert package.model_data_url == record.step("Train").properties["ModelArtifacts"]["S3ModelArtifacts"]
    doc = json.loads((Path(record.run_dir) / "execution.json").read_text())
    assert doc["status"] == "Succeeded" and doc["steps"][1]["properties"]["TrainingJobStatus"] == "Completed"

    again, progress = run(code, tmp_path, step_definition())
    assert again.status == "Succeeded"
    assert again.step("Make").cache_hit["execution_id"] == record.execution_id
    assert again.step("Train").cache_hit["execution_id"] == record.execution_id
    assert "cache hit: reused testpipe-Make-" in progress
    assert again.step("Train").properties == record.step("Train").properties
    # The cached model is the one registered: no duplicate version of it (issue 36).
    assert [p.version for p in Registry(tmp_path / "registry.sqlite").list()] == [1]
    assert again.step("Register").properties["ModelPackageVersion"] == 1
    assert "group v1 (Approved)" in progress
    assert f"registered by {record.execution_id}: the same model (--no-cache trains a new one)" in progress

    # A changed argument (the parameter feeds ContainerArguments) misses the cache: a new model.
    third, _ = run(code, tmp_path, step_definition(), {"Score": 0.9})
    assert third.step("Make").cache_hit is None and third.step("Train").cache_hit is None
    assert [p.version for p in Registry(tmp_path / "registry.sqlite").list()] == [1, 2]


def test_the_else_branch_fails_with_the_fail_steps_message(code, tmp_path):
    record, _ = run(code, tmp_path, step_definition(), {"Threshold": 0.95})
    assert record.status == "Failed"
    assert record.failure_reason == "score 0.8 is below 0.95"
    # Its cost is one line under the steps (issue 36: a long block buried the failure).
    from pipeline.local.execution import summary_table

    cost = summary_table(record).split("\n\n", 1)[1].splitlines()
    assert len(cost) == 1 and cost[0].startswith("cost and carbon so far: ") and cost[0].endswith(" over 2 job(s)")
    assert record.step("Register").status == "NotExecuted"
    assert record.step("TooLow").status == "Failed"
    assert Registry(tmp_path / "registry.sqlite").list() == []


INTERNAL = [{"ExceptionType": ["SageMaker.JOB_INTERNAL_ERROR"], "IntervalSeconds": 2,
             "BackoffRate": 3.0, "MaxAttempts": 2}]


def test_retry_policy_retries_a_killed_job_and_it_resumes_from_checkpoints(code, tmp_path):
    delays = []
    record, progress = run(code, tmp_path, step_definition("die-once", INTERNAL), sleep=delays.append)
    assert record.status == "Succeeded", record.failure_reason
    train = record.step("Train")
    assert train.attempts == 2 and delays == [2.0]
    assert train.job_name.endswith("-2")
    assert "retrying Train in 2s (retry 1 of 2)" in progress


def test_retry_policy_gives_up_after_max_attempts_and_ignores_script_errors(code, tmp_path):
    always_dies = step_definition("die-once", INTERNAL)
    # Without the checkpoint the marker never survives: every attempt dies.
    del always_dies["Steps"][1]["Arguments"]["CheckpointConfig"]
    delays = []
    record, _ = run(code, tmp_path, always_dies, sleep=delays.append)
    assert record.status == "Failed" and record.step("Train").attempts == 3
    assert delays == [2.0, 6.0]  # IntervalSeconds x BackoffRate^n
    assert "SIGKILL" in record.failure_reason

    record, _ = run(code, tmp_path / "other", step_definition("error", INTERNAL))
    assert record.step("Train").attempts == 1
    assert record.failure_reason == "step Train failed: AlgorithmError: algo-1 exited with code 1: a bug in the script"


def test_an_empty_input_from_a_parameter_is_refused_before_anything_runs(code, tmp_path):
    definition = step_definition()
    definition["Parameters"].append({"Name": "Raw", "Type": "String", "DefaultValue": f"s3://{BUCKET}/raw/"})
    definition["Steps"][0]["Arguments"]["ProcessingInputs"].append({
        "InputName": "raw", "S3Input": {"S3Uri": {"Get": "Parameters.Raw"}, "LocalPath": "/opt/ml/processing/input/raw"}})
    with pytest.raises(UserError, match=r"Make input 'raw': no objects under s3://test-bucket/raw/"):
        run(code, tmp_path, definition)
    with pytest.raises(UserError, match="Make input 'raw' S3Uri 'http://x' is not an s3:// URI"):
        run(code, tmp_path, definition, {"Raw": "http://x"})
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_preflight_lists_every_missing_location_the_definition_reads_at_once(code, tmp_path):
    """Literal inputs, parameters inside a Std:Join, code bundles: all checked before the first
    step and refused together. A location some step writes is not required beforehand."""

    def preflight(definition):
        options = RunOptions(workdir=tmp_path, storage=code, echo=False, stream=Capture())
        PipelineRunner(definition, "testpipe", options).preflight()

    definition = step_definition()
    preflight(definition)  # everything the fixture uploaded is there
    definition["Parameters"].append({"Name": "Raw", "Type": "String", "DefaultValue": f"s3://{BUCKET}/raw"})
    inputs = definition["Steps"][0]["Arguments"]["ProcessingInputs"]
    inputs.append({"InputName": "literal", "S3Input": {
        "S3Uri": f"s3://{BUCKET}/Parameters.d/", "LocalPath": "/opt/ml/processing/input/literal"}})
    inputs.append({"InputName": "joined", "S3Input": {
        "S3Uri": {"Std:Join": {"On": "/", "Values": [{"Get": "Parameters.Raw"}, "part"]}},
        "LocalPath": "/opt/ml/processing/input/joined"}})
    inputs.append({"InputName": "earlier", "S3Input": {
        "S3Uri": f"s3://{BUCKET}/runs/made-by-make", "LocalPath": "/opt/ml/processing/input/earlier"}})
    definition["Steps"][0]["Arguments"]["ProcessingOutputConfig"]["Outputs"].append(
        processing_output("more", f"s3://{BUCKET}/runs/made-by-make", "/opt/ml/processing/output/more"))
    definition["Steps"][1]["Arguments"]["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(
        f"s3://{BUCKET}/code/absent/sourcedir.tar.gz")
    with pytest.raises(UserError) as refused:
        preflight(definition)
    lines = str(refused.value).splitlines()
    assert lines[0].startswith("3 locations the definition reads are missing or malformed in the local object store")
    assert "trainpipe store cp" in lines[0]
    assert lines[1:] == [
        f"  - Make input 'literal': no objects under s3://{BUCKET}/Parameters.d/",
        f"  - Make input 'joined': no objects under s3://{BUCKET}/raw/part",
        f"  - Train sagemaker_submit_directory: no object s3://{BUCKET}/code/absent/sourcedir.tar.gz",
    ]
    assert not (tmp_path / "runs").exists()


def test_a_local_path_for_an_s3_parameter_is_copied_into_the_store(code, tmp_path):
    definition = step_definition()
    definition["Parameters"].append({"Name": "Raw", "Type": "String", "DefaultValue": "s3://other-bucket/raw"})
    definition["Steps"][0]["Arguments"]["ProcessingInputs"].append({"InputName": "raw", "S3Input": {
        "S3Uri": {"Get": "Parameters.Raw"}, "LocalPath": "/opt/ml/processing/input/raw"}})
    data = tmp_path / "my data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "a.csv").write_text("x\n1\n")
    for given in (str(data), f"file://{data}"):
        options = RunOptions(workdir=tmp_path, storage=code, echo=False, stream=Capture(),
                             execution_parameters={"Raw": given})
        runner = PipelineRunner(definition, "testpipe", options)
        runner.preflight()
        uri = runner.parameters["Raw"]
        assert uri.startswith("s3://other-bucket/trainpipe-local-inputs/Raw/") and uri.endswith("/")
        assert code.list(uri) == [uri + "sub/a.csv"]
        assert runner.record.parameters["Raw"] == uri
    options = RunOptions(workdir=tmp_path, storage=code, echo=False, stream=Capture(),
                         execution_parameters={"Raw": str(tmp_path / "absent")})
    with pytest.raises(UserError, match=r"parameter Raw='.*absent': no such file or directory; give an s3:// URI, or a local"):
        PipelineRunner(definition, "testpipe", options).preflight()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_every_process_and_marks_the_execution_stopped(code, tmp_path, sig):
    definition_file = tmp_path / "definition.json"
    definition_file.write_text(json.dumps(step_definition("sleep")))
    workdir = tmp_path / "work"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The store the fixture filled is tmp_path/store; the CLI takes <workdir>/store.
    (workdir).mkdir()
    (workdir / "store").symlink_to(tmp_path / "store")
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition_file),
         "--workdir", str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    lines = []
    deadline = time.monotonic() + 60
    for line in process.stdout:
        lines.append(line)
        if "training started" in line or time.monotonic() > deadline:
            break
    assert any("training started" in line for line in lines), "".join(lines)
    process.send_signal(sig)
    rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    assert output.rstrip().splitlines()[-1].endswith("Stopped: stopped by the user (Ctrl-C / SIGTERM)")
    run_dir = next((workdir / "runs").iterdir())
    doc = json.loads((run_dir / "execution.json").read_text())
    assert doc["status"] == "Stopped"
    assert [(s["name"], s["status"]) for s in doc["steps"]] == [("Make", "Succeeded"), ("Train", "Stopped")]
    # Completed steps keep their outputs.
    make_output = doc["steps"][0]["properties"]["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"]
    assert code.list(make_output)
    assert leftover_processes(str(workdir)) == []


def test_execution_json_and_the_summary_carry_cost_and_energy(code, tmp_path):
    from pipeline.local.execution import summary_table

    record, _ = run(code, tmp_path, step_definition())
    assert record.status == "Succeeded", record.failure_reason
    doc = json.loads((Path(record.run_dir) / "execution.json").read_text())
    train = next(s for s in doc["steps"] if s["name"] == "Train")["cost"]
    assert train["kind"] == "Training" and train["instance_count"] >= 1
    assert train["seconds"] > 0 and train["energy"]["kwh"] > 0
    assert train["energy"]["method"].startswith(("estimated", "measured"))
    assert {f["name"].split(":")[0] for f in train["energy"]["factors"]} >= {"PUE"}
    jobs = [s["cost"] for s in doc["steps"] if s.get("cost")]
    assert doc["cost"]["jobs"] == len(jobs) == 2
    assert doc["cost"]["energy_kwh"] == pytest.approx(sum(j["energy"]["kwh"] for j in jobs))
    # The request's instance type is priced from the shipped table or named as missing.
    assert train["cost_usd"] is not None or any("--price" in n for n in train["notes"])
    table = summary_table(record)
    assert "cost and carbon" in table and "TOTAL" in table and "grid intensity" in table


def test_a_runner_killed_with_sigkill_leaves_a_failed_execution_and_no_process(code, tmp_path):
    definition_file = tmp_path / "definition.json"
    definition_file.write_text(json.dumps(step_definition("sleep")))
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "store").symlink_to(tmp_path / "store")
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition_file),
         "--workdir", str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    lines = []
    deadline = time.monotonic() + 60
    for line in process.stdout:
        lines.append(line)
        if "training started" in line or time.monotonic() > deadline:
            break
    assert any("training started" in line for line in lines), "".join(lines)
    process.kill()  # SIGKILL: no cleanup, no last record
    process.communicate(timeout=30)
    run_dir = next((workdir / "runs").iterdir())
    doc = json.loads((run_dir / "execution.json").read_text())
    assert doc["status"] == "Executing"
    token = (Path(doc["steps"][1]["job_dir"]) / "job.token").read_text()
    assert tagged_pids(token) != []  # the job outlived its runner

    listed = subprocess.run([sys.executable, "-m", "pipeline", "executions", "--local",
                             "--workdir", str(workdir)], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    row = listed.stdout.splitlines()[2]
    assert row.startswith(run_dir.name) and " Failed " in row and "runner died" in row, listed.stdout
    doc = json.loads((run_dir / "execution.json").read_text())
    assert doc["status"] == "Failed" and doc["failure_reason"].startswith("runner died: the trainpipe process (pid ")
    assert [(s["name"], s["status"]) for s in doc["steps"]] == [("Make", "Succeeded"), ("Train", "Failed")]
    assert doc["steps"][1]["failure_reason"] == "runner died"
    assert tagged_pids(token) == [] and leftover_processes(str(workdir)) == []

    status = subprocess.run([sys.executable, "-m", "pipeline", "status", "--local", run_dir.name,
                             "--workdir", str(workdir)], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "status         Failed" in status.stdout and "Train" in status.stdout


def test_a_running_execution_is_not_mistaken_for_a_dead_one(tmp_path):
    from pipeline.local.execution import ExecutionRecord, RunnerLock, load

    record = ExecutionRecord("e1", "p", str(tmp_path / "runs" / "e1"), {})
    lock = RunnerLock(Path(record.run_dir))
    lock.acquire()
    record.save()
    assert load(Path(record.run_dir))["status"] == "Executing"  # held by this live process
    lock.release()
    assert load(Path(record.run_dir))["status"] == "Failed"


def test_the_summary_names_the_model_and_evaluation_files_beside_their_uris(code, tmp_path):
    record, _ = run(code, tmp_path, step_definition())
    uri = record.step("Train").properties["ModelArtifacts"]["S3ModelArtifacts"]
    assert record.step("Train").detail == f"model {uri} ({code.local_path(uri)})"
    code.put_bytes(b"{}", "s3://bucket/eval/evaluation.json")

    class Runner:
        storage = code
        _with_file = PipelineRunner._with_file

    outputs = {"ProcessingOutputConfig": {"Outputs": [{"S3Output": {"S3Uri": "s3://bucket/eval"}},
                                                      {"S3Output": {"S3Uri": "s3://bucket/none"}}]}}
    assert PipelineRunner._reports(Runner(), outputs) == (
        f"evaluation.json s3://bucket/eval/evaluation.json ({code.local_path('s3://bucket/eval/evaluation.json')})")


def test_which_steps_run_side_by_side(tmp_path):
    """Job steps (and Callback, and Lambda given a handler) run beside others; a Tuning or
    Transform step runs alone; steps with no job run at once (dag/scheduler.py's placements)."""
    from pipeline.local.dag.interpreter import StepNode
    from pipeline.local.dag.scheduler import ALONE, QUICK, SIDE_BY_SIDE
    from pipeline.local.store.storage import LocalStorage

    lambda_step = {"Name": "Handled", "Type": "Lambda", "Arguments": {}, "FunctionArn": "arn:aws:lambda:x"}
    runner = PipelineRunner({"Version": "2020-12-01", "Steps": [lambda_step]}, "p",
                            RunOptions(workdir=tmp_path, storage=LocalStorage(tmp_path / "store"),
                                       lambdas={"Handled": (tmp_path / "h.py", "f")}))
    placed = {kind: runner.placement(StepNode(name, kind, {}, ())) for name, kind in (
        ("P", "Processing"), ("T", "Training"), ("C", "Callback"), ("Handled", "Lambda"), ("H", "Tuning"),
        ("X", "Transform"), ("Cond", "Condition"), ("F", "Fail"), ("R", "RegisterModel"))}
    assert placed == {"Processing": SIDE_BY_SIDE, "Training": SIDE_BY_SIDE, "Callback": SIDE_BY_SIDE,
                      "Lambda": SIDE_BY_SIDE, "Tuning": ALONE, "Transform": ALONE, "Condition": QUICK,
                      "Fail": QUICK, "RegisterModel": QUICK}
