"""The simulated container contract matches what the sagemaker-training toolkit produces."""

from __future__ import annotations

import json

from pipeline.local.jobs import contract

# Output of the toolkit's own mapping.to_cmd_args on these values (shared/notes, section 1).
TOOLKIT_HPS = {
    "epochs": 10, "layers": [64, 32], "lr": 0.01, "model_dir": "s3://b/job/model",
    "opt": {"name": "adam", "beta": 0.9}, "use-bn": True, "x": "hi there",
}
TOOLKIT_ARGS = ["--epochs", "10", "--layers", "[64, 32]", "--lr", "0.01", "--model_dir",
                "s3://b/job/model", "--opt", "beta=0.9,name=adam", "--use-bn", "True", "-x", "hi there"]


def test_cmd_args_like_the_toolkit():
    assert contract.to_cmd_args(TOOLKIT_HPS) == TOOLKIT_ARGS


def test_env_vars_like_the_toolkit():
    env = contract.to_env_vars({"hp_use-bn": True, "hps": {"b": 1, "a": "x"}, "current_host": "algo-1"})
    assert env == {"SM_HP_USE-BN": "true", "SM_HPS": '{"a":"x","b":1}', "SM_CURRENT_HOST": "algo-1"}


def test_hyperparameters_decoded_like_the_toolkit():
    raw = {"epochs": "10", "name": '"resnet"', "flag": "true", "free": "not json",
           "sagemaker_program": '"train.py"'}
    decoded = contract.decode_hyperparameters(raw)
    assert decoded == {"epochs": 10, "name": "resnet", "flag": True, "free": "not json",
                       "sagemaker_program": "train.py"}
    user, framework = contract.split_hyperparameters(decoded)
    assert "sagemaker_program" in framework and "sagemaker_program" not in user


def test_training_tree_and_environment(tmp_path):
    base = tmp_path / "algo-2"
    hps = {"epochs": "3", "model_dir": '"/opt/ml/model"', "sagemaker_program": '"train.py"',
           "sagemaker_mpi_enabled": "true"}
    channels = {"train": {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key",
                          "RecordWrapperType": "None"},
                "manifest": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                             "RecordWrapperType": "None"}}
    hosts = contract.host_names(2)
    contract.write_training_tree(base, current_host="algo-2", hosts=hosts, instance_type="ml.c5.xlarge",
                                 hyperparameters=hps, input_data_config=channels)
    config = base / "input" / "config"
    assert json.loads((config / "hyperparameters.json").read_text()) == hps
    resources = json.loads((config / "resourceconfig.json").read_text())
    assert resources["current_host"] == "algo-2" and resources["hosts"] == ["algo-1", "algo-2"]
    assert json.loads((config / "inputdataconfig.json").read_text()) == channels
    assert (base / "input" / "data" / "manifest").is_dir()
    assert not (base / "input" / "data" / "train").exists()  # Pipe: FIFOs come later
    for sub in ("model", "output/data", "checkpoints", "code"):
        assert (base / sub).is_dir()

    env = contract.training_environment(
        base, current_host="algo-2", hosts=hosts, instance_type="ml.c5.xlarge",
        hyperparameters=hps, input_data_config=channels, job_name="job-1")
    assert env["SAGEMAKER_BASE_DIR"] == str(base)
    assert env["SM_MODEL_DIR"] == str(base / "model")
    assert env["SM_CHANNEL_TRAIN"] == str(base / "input" / "data" / "train")
    assert json.loads(env["SM_HOSTS"]) == hosts and env["SM_CURRENT_HOST"] == "algo-2"
    assert json.loads(env["SM_CHANNELS"]) == ["manifest", "train"]
    # Container paths given as values are moved under the host's base directory.
    assert env["SM_HP_MODEL_DIR"] == str(base / "model")
    assert json.loads(env["SM_USER_ARGS"]) == ["--epochs", "3", "--model_dir", str(base / "model")]
    assert json.loads(env["SM_FRAMEWORK_PARAMS"])["sagemaker_mpi_enabled"] is True
    assert contract.user_command("python", hps, base) == [
        "python", "train.py", "--epochs", "3", "--model_dir", str(base / "model")]


def test_processing_tree_creates_local_paths(tmp_path):
    job = {
        "ProcessingInputs": [{"InputName": "code", "S3Input": {"LocalPath": "/opt/ml/processing/input/code"}}],
        "ProcessingOutputConfig": {"Outputs": [
            {"OutputName": "train", "S3Output": {"LocalPath": "/opt/ml/processing/output/train"}}]},
    }
    contract.write_processing_tree(tmp_path, current_host="algo-1", hosts=["algo-1"], job_config=job)
    assert (tmp_path / "processing" / "input" / "code").is_dir()
    assert (tmp_path / "processing" / "output" / "train").is_dir()
    assert json.loads((tmp_path / "config" / "resourceconfig.json").read_text())["hosts"] == ["algo-1"]
    env = contract.processing_environment(tmp_path, {"PYTHONPATH": "/opt/ml/processing/input/code"})
    assert env["PYTHONPATH"] == str(tmp_path / "processing" / "input" / "code")
    assert contract.relocate("/opt/mlx/other", tmp_path) == "/opt/mlx/other"


def test_a_hyperparameter_name_with_an_equals_sign_is_refused_in_one_line_before_any_step(tmp_path):
    """A definition's Train step with the hyperparameter 'a=b', through run --local's process:
    one line before any step (it was a job dying in an internal error)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pipeline.local.store.storage import LocalStorage
    from tests import readme_record
    from tests.pipeline.local.test_runner import step_definition
    from tests.pipeline.tracking.conftest import put_step_code

    workdir = tmp_path / "work"
    put_step_code(LocalStorage(workdir / "store"))
    definition = step_definition()
    (train,) = [s for s in definition["Steps"] if s["Name"] == "Train"]
    train["Arguments"]["HyperParameters"]["a=b"] = "1"
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(definition))
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(path),
                           "--workdir", str(workdir)], cwd=Path(__file__).resolve().parents[4], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "TRAINPIPE_TRACKING": "off"})
    assert done.returncode == 2, done.stdout[-1500:] + done.stderr[-1500:]
    last = done.stderr.strip().splitlines()[-1]
    readme_record.record(last)
    assert last.endswith("step Train: hyperparameter name(s) 'a=b' cannot become the SM_HP_<NAME> variable the "
                         "training toolkit sets ('=' ends a variable's name); rename them"), last
    assert "Traceback" not in done.stderr and not list(workdir.glob("runs/*/jobs/*"))
