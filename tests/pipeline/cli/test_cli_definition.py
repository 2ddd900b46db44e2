"""``trainpipe definition`` driven as a user would: a subprocess, stdout, stderr, exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline.cli.main import main


def trainpipe(*args):
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, timeout=120
    )


def test_prints_the_definition_json_and_nothing_else():
    result = trainpipe("definition", "-p", "Epochs=3", "-p", "TrainInputMode=Pipe")
    assert result.returncode == 0, result.stderr
    definition = json.loads(result.stdout)  # stdout is pure JSON
    params = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
    assert params["Epochs"] == 3 and params["TrainInputMode"] == "Pipe"


def test_epochs_1_alone_is_a_valid_smoke_run_with_one_line_about_the_warmup():
    result = trainpipe("definition", "-p", "Epochs=1")
    assert result.returncode == 0, result.stderr
    params = {p["Name"]: p["DefaultValue"] for p in json.loads(result.stdout)["Parameters"]}
    assert (params["Epochs"], params["WarmupEpochs"]) == (1, 1)
    assert result.stderr.strip().splitlines() == [
        "note: WarmupEpochs defaults to 2, longer than Epochs=1: warming up over 1 epoch(s) instead"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-p", "Epochs=0"], "Epochs=0: must be at least 1"),
        (["-p", "Nope=1"], "unknown parameter 'Nope'"),
        (["-p", "TrainInputMode=Stream"], "must be one of File, Pipe, FastFile"),
        (["-p", "AccuracyThreshold=2"], "must be at most 1"),
        (["-p", "TrainingInstanceCount=64", "-p", "ProcessesPerHost=8"], "512 shards per split"),
        (["--init-model-uri", "/tmp/weights"], "must be an s3:// URI"),
    ],
)
def test_bad_input_is_one_clear_line_and_a_non_zero_exit(argv, message, capsys):
    assert main(["definition", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_bad_flag_value_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["definition", "--mixed-precision", "fp8"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'fp8'" in capsys.readouterr().err


def test_writes_to_a_file(tmp_path):
    out = tmp_path / "definition.json"
    assert main(["definition", "--bucket", "my-bucket", "--region", "eu-west-1", "-o", str(out)]) == 0
    text = out.read_text()
    assert "s3://my-bucket/" in text and "eu-west-1" in text


def test_settings_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINPIPE_BUCKET", "env-bucket")
    out = tmp_path / "d.json"
    assert main(["definition", "-o", str(out)]) == 0
    assert "s3://env-bucket/" in out.read_text()
    # The flag wins over the environment.
    assert main(["definition", "--bucket", "flag-bucket", "-o", str(out)]) == 0
    assert "s3://flag-bucket/" in out.read_text() and "env-bucket" not in out.read_text()


def test_parameter_server_without_a_train_distribution_takes_fully_replicated_and_says_so():
    """Issue 36: the default ShardedByS3Key cannot run with parameter servers on 2 hosts; the
    user did not choose it, so the build chooses what works, in one line on stderr."""
    result = trainpipe("definition", "--distribution", "parameter_server")
    assert result.returncode == 0, result.stderr
    params = {p["Name"]: p["DefaultValue"] for p in json.loads(result.stdout)["Parameters"]}
    assert (params["TrainDistribution"], params["TrainingInstanceCount"]) == ("FullyReplicated", 2)
    assert result.stderr.strip().splitlines() == [
        "note: --distribution parameter_server: TrainDistribution=FullyReplicated (what it runs with; "
        "-p sets another)"]
    # On a GPU type, one process per host too (ProcessesPerHost's default is the GPUs, for Horovod).
    gpus = trainpipe("definition", "--distribution", "mirrored", "-p", "TrainingInstanceType=ml.p3.8xlarge")
    assert gpus.returncode == 0, gpus.stderr
    assert "ProcessesPerHost=1" in gpus.stderr
    # What the user set is theirs: refused as before, with the way out.
    chosen = trainpipe("definition", "--distribution", "parameter_server", "-p", "TrainDistribution=ShardedByS3Key")
    assert chosen.returncode == 2 and "pass -p TrainDistribution=FullyReplicated" in chosen.stderr
    assert "note:" not in chosen.stderr


def test_a_pretrained_architecture_without_weights_says_what_trains_and_how_to_get_weights():
    """Issue 36: mobilenet_v2 without --init-model-uri froze a random backbone. The job now
    trains the whole network (tests/training_entry/model/test_model.py); the build says so."""
    result = trainpipe("definition", "-p", "ModelArchitecture=mobilenet_v2")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        "note: ModelArchitecture=mobilenet_v2 without --init-model-uri: no pretrained weights, so the whole "
        "network trains from random weights; for ImageNet weights run trainpipe init-weights --architecture "
        "mobilenet_v2 where there is internet, then pass --init-model-uri (docs/model.md)"]
    weighted = trainpipe("definition", "-p", "ModelArchitecture=mobilenet_v2", "--init-model-uri", "s3://b/init/")
    assert weighted.returncode == 0 and "note:" not in weighted.stderr


def test_a_tracking_server_in_the_environment_does_not_make_the_sdk_wait_on_a_job(monkeypatch):
    # SDK v2's fit() forces wait=True when MLFLOW_TRACKING_URI is set and network isolation is
    # on, so the build called describe_training_job against AWS (a user pointing MLflow at a
    # server, or mlflow.set_tracking_uri in the same process, which sets the variable).
    import os

    env = {**os.environ, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-m", "pipeline", "definition", "-p", "Epochs=3"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["Steps"]
    from pipeline.definition.build import build_definition

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    assert build_definition()["Steps"]
    assert os.environ["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:9"  # given back after the build
