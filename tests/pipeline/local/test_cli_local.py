"""`trainpipe run --local` / `train --local` / `models`: argument parsing and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest

from pipeline.cli import local as cmd
from pipeline.cli.main import main
from pipeline.local.store.registry import Registry


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


def test_sagemaker_local_without_docker_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["run", "--sagemaker-local", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--sagemaker-local needs Docker, and `docker` is not on PATH" in err
    assert "use --local, which needs neither" in err


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("SAGEMAKER_LOCAL_TEST") != "1" or cmd.docker_problem() is not None,
                    reason="opt-in (SAGEMAKER_LOCAL_TEST=1): needs Docker, Compose, AWS credentials")
def test_sagemaker_local_runs_with_docker(capsys):  # pragma: no cover - no Docker here
    main(["run", "--sagemaker-local", "-p", "Epochs=1"])
    out = capsys.readouterr().out
    # The SDK's local mode refuses RegisterModel, so the execution cannot succeed; it must
    # get as far as running the steps it supports.
    assert "PreprocessData: Succeeded" in out


def test_models_lists_the_registry(tmp_path, capsys):
    assert main(["models", "--workdir", str(tmp_path)]) == 0
    assert "no model packages" in capsys.readouterr().out
    Registry(tmp_path / "registry.sqlite").register(
        group="trainpipe-models", approval_status="PendingManualApproval",
        model_data_url="s3://b/m/model.tar.gz", region="us-east-1", account="1", created="2026-01-01",
        request={}, metrics={"metrics": {"accuracy": {"value": 0.9555}}})
    assert main(["models", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["GROUP", "VERSION", "STATUS", "CREATED", "METRICS", "MODEL"]
    assert out[1].split() == ["trainpipe-models", "1", "PendingManualApproval", "2026-01-01",
                              "accuracy=0.9555", "s3://b/m/model.tar.gz"]
    assert main(["models", "--workdir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["ModelPackageVersion"] == 1


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
