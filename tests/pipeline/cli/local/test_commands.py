"""`trainpipe run --local` / `train --local` / `models`: argument parsing and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.definition.steps.names import written_pipeline_name
from pipeline.local.store.registry import Registry
from pipeline.local.store.storage import LocalStorage
from tests.pipeline.local.helpers import (
    BUCKET,
    processing_input,
    processing_request,
    put_code,
    put_script,
    training_request,
)


@pytest.mark.parametrize(("argv", "message"), [
    (["-p", "Epoch=3"], "unknown parameter 'Epoch'"),
    (["-p", "Epochs=three"], "Epochs='three': expected an integer"),
    (["-p", "TrainInputMode=Stream"], "TrainInputMode='Stream': must be one of File, Pipe, FastFile"),
    (["-p", "TrainingInstanceCount=100", "-p", "ProcessesPerHost=4"], "400 shards per split"),
    (["-p", "InputDataUri=s3://Bad_Bucket/x"], "InputDataUri 's3://Bad_Bucket/x': 'Bad_Bucket' is not a valid bucket"),
    (["-p", "InputDataUri=/home/me/data.csv"], "-p InputDataUri=/home/me/data.csv: no such file or directory"),
])
def test_bad_input_is_one_line_before_anything_runs(argv, message, tmp_path, capsys):
    assert main(["run", "--local", "--workdir", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trainpipe run: error: ") and message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_models_lists_the_registry(tmp_path, capsys):
    assert main(["models", "--workdir", str(tmp_path)]) == 0
    assert "no model packages" in capsys.readouterr().out
    Registry(tmp_path / "registry.sqlite").register(
        group="trainpipe-models", approval_status="PendingManualApproval",
        model_data_url="s3://b/m/model.tar.gz", region="us-east-1", account="1", created="2026-01-01",
        request={}, metrics={"kind": "table", "metrics": {"accuracy": {"value": 0.9555}}})
    assert main(["models", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    # KIND: the data the model takes (issue 49: serve and predict choose by it).
    assert out[0].split() == ["GROUP", "VERSION", "STATUS", "KIND", "CREATED", "METRICS", "MODEL"]
    assert out[1].split() == ["trainpipe-models", "1", "PendingManualApproval", "table", "2026-01-01",
                              "accuracy=0.9555", "s3://b/m/model.tar.gz"]
    assert main(["models", "--workdir", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)[0]
    assert listed["ModelPackageVersion"] == 1 and listed["Kind"] == "table"


USER_SCRIPT = """
    import argparse, json, os, pathlib
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--optimizer")
    args = parser.parse_args()
    files = sorted(p.name for p in pathlib.Path(os.environ["SM_CHANNEL_TRAIN"]).iterdir())
    pathlib.Path(os.environ["SM_MODEL_DIR"], "model.json").write_text(json.dumps({"files": files}))
    print(f"loss={1.0 / args.epochs} optimizer={args.optimizer}")
"""


def test_train_local_runs_a_plain_script_and_says_where_the_model_is(tmp_path, capsys):
    script = tmp_path / "src" / "fit.py"
    script.parent.mkdir()
    script.write_text(textwrap.dedent(USER_SCRIPT))
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("1,2\n")
    (data / "b.csv").write_text("3,4\n")
    code = main(["train", "--local", "--entry-point", str(script), "--workdir", str(tmp_path / "w"),
                 "--channel", f"train={data}", "--hyperparameter", "epochs=4",
                 "--hyperparameter", "optimizer=adam", "--metric", "loss=loss=([0-9.]+)",
                 "--job-name", "fit-1", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "metrics: loss=0.25" in out
    model_line = next(line for line in out.splitlines() if line.startswith("model:"))
    assert "s3://trainpipe-artifacts-placeholder/trainpipe/training-local/fit-1/output/model.tar.gz" in model_line
    assert out.rstrip().splitlines()[-1] == "Training job fit-1 Completed"
    report = tmp_path / "w" / "jobs" / "fit-1" / "hosts" / "algo-1" / "model" / "model.json"
    assert json.loads(report.read_text()) == {"files": ["a.csv", "b.csv"]}


def test_train_local_failure_exits_non_zero_with_the_reason_last(tmp_path, capsys):
    script = tmp_path / "fail.py"
    script.write_text("raise SystemExit('no data in SM_CHANNEL_TRAIN')\n")
    code = main(["train", "--local", "--entry-point", str(script), "--workdir", str(tmp_path / "w"),
                 "--job-name", "fail-1", "--quiet"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("Training job fail-1 Failed: AlgorithmError: algo-1 exited with code 1: "
                       "no data in SM_CHANNEL_TRAIN")


def test_train_local_failure_names_the_channel_s_local_file_once(tmp_path, capsys):
    """A script failing on a file of its channel: the last line names the user's file, not its
    /opt/ml copy, and only the last line says why (issue 36)."""
    script = tmp_path / "fail.py"
    script.write_text("import os\nraise SystemExit(f\"no label in {os.environ['SM_CHANNEL_TRAIN']}/rows.csv\")\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text("a,b\n1,2\n")
    code = main(["train", "--local", "--entry-point", str(script), "--workdir", str(tmp_path / "w"),
                 "--job-name", "fail-2", "--channel", f"train={tmp_path / 'data'}"])
    assert code == 1
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last == f"Training job fail-2 Failed: AlgorithmError: algo-1 exited with code 1: no label in {tmp_path}/data/rows.csv"
    assert [line for line in (captured.out + captured.err).splitlines() if "AlgorithmError" in line] == [last]


def test_train_local_refuses_sharding_more_hosts_than_objects(tmp_path, capsys):
    script = tmp_path / "noop.py"
    script.write_text("pass\n")
    data = tmp_path / "one.csv"
    data.write_text("x\n")
    code = main(["train", "--local", "--entry-point", str(script), "--workdir", str(tmp_path / "w"),
                 "--instances", "2", "--channel", f"train={data}:File:ShardedByS3Key", "--quiet",
                 "--job-name", "shard-1"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    last = err[-1]
    assert last.startswith("trainpipe train: error: channel 'train': ShardedByS3Key over 2 instances "
                           "needs at least 2 objects")
    assert not list((tmp_path / "w").rglob("algo-*.log")), "nothing may start"
    assert "use at most 1 instance, FullyReplicated, or split the data into more objects" in last


@pytest.mark.parametrize("bad, message", [
    (["--channel", "train={data}:File:ShardedByS3Key", "--instances", "3"],
     "channel 'train': ShardedByS3Key over 3 instances needs at least 3 objects"),
    (["--channel", "train={empty}"], "--channel train: {empty} holds no files to train on"),
    (["--channel", "train={data}", "--channel", "test=s3://trainpipe-artifacts-placeholder/none/"],
     "channel 'test': no objects under s3://trainpipe-artifacts-placeholder/none/"),
    (["--channel", "train={data}", "--output-path", "s3://Bad_Bucket/x"], "--output-path 's3://Bad_Bucket/x'"),
    (["--channel", "train={data}", "--metric", "loss=([0-9"], "--metric loss: bad regex"),
    (["--channel", "train={data}", "--hyperparameter", "sagemaker_program=x.py"],
     "names starting with sagemaker_ are set by trainpipe"),
])
def test_bad_train_local_input_creates_nothing(tmp_path, capsys, bad, message):
    script = tmp_path / "noop.py"
    script.write_text("pass\n")
    data, empty = tmp_path / "data", tmp_path / "empty"
    data.mkdir()
    empty.mkdir()
    for i in range(2):
        (data / f"part-{i}.csv").write_text("x\n")
    workdir = tmp_path / "w"
    argv = [a.format(data=data, empty=empty) for a in bad]
    code = main(["train", "--local", "--entry-point", str(script), "--workdir", str(workdir),
                 "--job-name", "bad-1", "--quiet", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert message.format(empty=empty) in err[0]
    # No job folder, no request.json, no object uploaded (the store is <workdir>/store).
    assert not (workdir / "jobs").exists()
    assert [p for p in workdir.rglob("*") if p.is_file()] == []


# --- A job's own failure, said once (issue 36) ------------------------------------------------
# A user's processing script that fails on a row of its input, naming the file by the path it
# read (its container copy), and a training script that writes SageMaker's failure file.
# SAGEMAKER_BASE_DIR: /opt/ml in the host's namespaces, the host's folder where there are none.
FAILING_PREPARE = """
    import os, pathlib
    for path in sorted(pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"], "processing/input/rows").rglob("*.csv")):
        raise ValueError(f"row 3 of {path} has 2 fields, expected 3")
"""
FAILING_TRAIN = """
    import os, sys
    channel = os.environ["SM_CHANNEL_TRAIN"]
    print("reading", channel, flush=True)
    with open(os.path.join(os.environ["SAGEMAKER_BASE_DIR"], "output/failure"), "w") as failure:
        failure.write(f"label 'cat' in {channel}/rows.csv is not a number\\n(a second line)")
    sys.exit(1)
"""


def failing_definition(tmp_path, step: str) -> Path:
    rows = {"Get": "Parameters.Rows"}
    if step == "Processing":
        arguments = processing_request(f"s3://{BUCKET}/code/prepare/", "prepare.py",
                                       inputs=[processing_input("rows", rows, "/opt/ml/processing/input/rows")])
    else:
        arguments = training_request(f"s3://{BUCKET}/code/train.tar.gz", program="train.py", channels=[
            {"ChannelName": "train", "InputMode": "File", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3DataDistributionType": "FullyReplicated", "S3Uri": rows}}}])
    store = LocalStorage(tmp_path / "work" / "store")
    put_script(store, f"s3://{BUCKET}/code/prepare/", "prepare.py", FAILING_PREPARE)
    put_code(store, f"s3://{BUCKET}/code/train.tar.gz", {"train.py": FAILING_TRAIN})
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps({
        "Version": "2020-12-01",
        "Parameters": [{"Name": "Rows", "Type": "String", "DefaultValue": f"s3://{BUCKET}/rows/"}],
        "Steps": [{"Name": "Prepare", "Type": step, "Arguments": arguments}]}))
    return path


@pytest.mark.parametrize("step, reason", [
    ("Processing", "AlgorithmError: algo-1 exited with code 1: ValueError: row 3 of {rows} has 2 fields, expected 3"),
    ("Training", "AlgorithmError: algo-1 exited with code 1: label 'cat' in {rows} is not a number "
                 "(and 1 more line(s) in {log})"),
])
def test_a_job_s_own_failure_is_said_once_at_the_end_naming_the_user_s_file(tmp_path, step, reason):
    """Through the CLI's process: the job's output (its traceback) is echoed, the live line
    and the summary say only "Failed", the last lines are the step's full log and the reason,
    which names the file the user gave (-p Rows=<local file>), not its /opt/ml copy."""
    (tmp_path / "mine").mkdir()
    rows = tmp_path / "mine" / "rows.csv"
    rows.write_text("a,b,y\n1,2,dog\n3,cat\n")
    run = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(failing_definition(tmp_path, step)),
         "--workdir", str(tmp_path / "work"), "--tracking-uri", "off",
         "-p", f"Rows={rows if step == 'Processing' else rows.parent}"],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[4])
    assert run.returncode == 1, run.stderr
    out, err = run.stdout.splitlines(), run.stderr.splitlines()
    log = Path(out[-1].removeprefix("full log:").strip())
    assert out[-1].startswith("full log: ") and log.name == "job.log" and log.is_file(), out[-3:]
    expected = reason.format(rows=rows, log=log)
    assert err[-1].endswith(f": step Prepare failed: {expected}"), err[-1]
    # Once: the reason's line is the last line only; the live line and the summary say Failed.
    said = [line for line in out + err if "AlgorithmError" in line]
    assert said == [err[-1]], said
    assert "==> Prepare: Failed" in out
    assert next(line for line in out if line.startswith("Prepare ")).split()[2] == "Failed"
    assert [line for line in out if line.startswith("cost and carbon")] != [] and not any("TOTAL" in line for line in out)
    if step == "Processing":  # the job's own output, its traceback, is still shown
        assert any(line.endswith("/processing/input/rows/rows.csv has 2 fields, expected 3")
                   and "ValueError: row 3 of " in line for line in out), out
    # The log keeps the reason as SageMaker has it (the container path, every line).
    assert "/input/" in log.read_text().rsplit("Failed: ", 1)[1] and str(rows) not in log.read_text()


def test_our_own_definition_file_is_the_same_pipeline(tmp_path, capsys):
    """Issue 49: `run --local --definition pipeline.json` on `trainpipe definition`'s own file ran
    as a pipeline named after the file (no cache hits, a new MLflow experiment, a second model
    version). The file carries the pipeline's name; --pipeline-name still wins; a file without
    one (an SDK pipeline's) is still named after the file."""
    saved = tmp_path / "pipeline.json"
    assert main(["definition", "--output", str(saved)]) == 0
    doc = json.loads(saved.read_text())
    assert doc["Metadata"] == {"PipelineName": "trainpipe"}
    assert written_pipeline_name(doc) == "trainpipe" and written_pipeline_name({"Metadata": {}}) is None
    assert main(["definition", "--pipeline-name", "mine", "--output", str(saved)]) == 0
    assert json.loads(saved.read_text())["Metadata"] == {"PipelineName": "mine"}



def test_run_definition_runs_under_the_name_the_file_carries(tmp_path):
    """Issue 49 through run --local's process: a definition file that carries its pipeline's
    name (as `trainpipe definition` writes it) runs under that name, not the file's; the
    --pipeline-name flag wins over it; a file without one (an SDK pipeline's) is named after the
    file. One Fail step: the name is what the run's first line and execution record say."""
    def run(definition: dict, *flags: str) -> str:
        path = tmp_path / "saved-definition.json"
        path.write_text(json.dumps(definition))
        done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(path),
                               "--workdir", str(tmp_path / "w"), "--tracking-uri", "off", *flags],
                              cwd=Path(__file__).resolve().parents[4], capture_output=True, text=True, timeout=300)
        assert done.returncode == 1 and done.stderr.strip().endswith("Failed: stop here"), done.stderr[-2000:]
        said = next(ln for ln in done.stdout.splitlines() if ln.startswith("trainpipe run --local: execution "))
        execution = said.split()[4]
        record = json.loads((tmp_path / "w" / "runs" / execution / "execution.json").read_text())
        return f"{said.split(' of ', 1)[1].split(',', 1)[0]}/{record['pipeline_name']}"

    steps = [{"Name": "Stop", "Type": "Fail", "Arguments": {"ErrorMessage": "stop here"}}]
    ours = {"Version": "2020-12-01", "Metadata": {"PipelineName": "trainpipe"}, "Parameters": [], "Steps": steps}
    assert run(ours) == "trainpipe/trainpipe"
    assert run(ours, "--pipeline-name", "other") == "other/other"
    assert run({**ours, "Metadata": {}}) == "saved-definition/saved-definition"

def test_run_help_names_only_step_types_that_do_not_run_locally(capsys):
    """Issue 49: `run --help` listed Transform and CreateModel among the steps that cannot run
    locally, which the runner does run (docs/local-mode.md)."""
    from pipeline.local.dag.interpreter import SUPPORTED_STEP_TYPES

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = text.split("steps that cannot run locally (", 1)[1].split(")", 1)[0]
    named = [name.strip(" .") for name in listed.split(",") if name.strip(" .")]
    # Callback steps and Lambda steps given a handler run locally (issue 46).
    assert named[:3] == ["Lambda without --lambda", "EMR", "QualityCheck"] and "Callback" not in named
    assert not set(named) & set(SUPPORTED_STEP_TYPES) and "CreateModel" not in text and "Transform," not in text
