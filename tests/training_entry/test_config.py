"""Hyperparameters, channels and hosts, read the way SageMaker hands them to the script."""

from __future__ import annotations

import json

import pytest

from pipeline.local.jobs import contract as local
from training_entry import config, contract
from training_entry.config import ConfigError, Hyperparameters

# What the training toolkit passes for the definition's hyperparameters: sorted --key value,
# str() of the JSON-decoded value (so booleans are True/False), plus --model_dir.
TOOLKIT_ARGS = [
    "--base-learning-rate", "0.002", "--batch-size", "16", "--epochs", "4",
    "--fp16-allreduce", "True", "--mixed-precision", "mixed_bfloat16",
    "--model_dir", "/opt/ml/model", "--seed", "3", "--steps-per-execution", "4", "--warmup-epochs", "1",
]


@pytest.mark.parametrize(("arguments", "size"), [
    ([], 32), (["--model-architecture", "efficientnet_lite0"], 224), (["--model-architecture", "mobilenet_v2"], 224),
    (["--model-architecture", "small_cnn", "--image-size", "0"], 32),
    (["--model-architecture", "resnet50", "--image-size", "96"], 96),
])
def test_image_size_0_is_the_architecture_s_own(arguments, size):
    """ImageSize's default (0): 224 px for a pretrained backbone (its ImageNet weights' size),
    32 for the small CNN; a size given is kept."""
    hp, _, _ = config.parse_hyperparameters(arguments)
    assert hp.image_size == size


def test_toolkit_arguments_parse():
    hp, model_dir, unknown = config.parse_hyperparameters(TOOLKIT_ARGS)
    assert hp == Hyperparameters(epochs=4, batch_size=16, base_learning_rate=0.002, warmup_epochs=1.0,
                                 steps_per_execution=4, seed=3, mixed_precision="mixed_bfloat16",
                                 fp16_allreduce=True)
    assert model_dir == "/opt/ml/model"
    assert unknown == []


def test_defaults_and_unknown_arguments_are_kept_aside():
    hp, model_dir, unknown = config.parse_hyperparameters(["--new-knob", "5", "--epochs", "2"])
    assert hp == Hyperparameters(epochs=2)
    assert model_dir is None
    assert unknown == ["--new-knob", "5"]


@pytest.mark.parametrize(("text", "value"), [("True", True), ("true", True), ("1", True),
                                             ("False", False), ("false", False), ("0", False)])
def test_booleans_as_the_toolkit_and_env_spell_them(text, value):
    hp, _, _ = config.parse_hyperparameters(["--fp16-allreduce", text])
    assert hp.fp16_allreduce is value


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fp16-allreduce", "maybe"], "bad hyperparameter: argument --fp16-allreduce: 'maybe' is not a boolean"),
        (["--mixed-precision", "fp8"], "bad hyperparameter: argument --mixed-precision: invalid choice: 'fp8'"),
        (["--epochs", "0"], "bad hyperparameter: --epochs 0: must be at least 1"),
        (["--batch-size", "x"], "bad hyperparameter: argument --batch-size: invalid int value: 'x'"),
        (["--base-learning-rate", "0"], "bad hyperparameter: --base-learning-rate 0.0: must be positive"),
        (["--warmup-epochs", "-1"], "bad hyperparameter: --warmup-epochs -1.0: must be 0 or more"),
        (["--steps-per-execution", "0"], "bad hyperparameter: --steps-per-execution 0: must be at least 1"),
    ],
)
def test_bad_hyperparameters_name_the_argument(argv, message):
    with pytest.raises(ConfigError) as info:
        config.parse_hyperparameters(argv)
    assert str(info.value).startswith(message)


# --- inputdataconfig.json ------------------------------------------------------------------
def _tree(tmp_path, channels: dict | str | None):
    cfg = tmp_path / "input" / "config"
    cfg.mkdir(parents=True)
    if channels is not None:
        (cfg / "inputdataconfig.json").write_text(channels if isinstance(channels, str) else json.dumps(channels))
    return {"SAGEMAKER_BASE_DIR": str(tmp_path)}


def test_missing_inputdataconfig_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as info:
        config.load_input_data_config({})
    path = tmp_path / "input" / "config" / "inputdataconfig.json"
    assert str(info.value).startswith(f"{path} is missing: SageMaker writes it for every training job")


def test_malformed_inputdataconfig_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    _tree(tmp_path, '{"train": {"TrainingInputMode": "File",}')
    with pytest.raises(ConfigError, match=r"inputdataconfig\.json is not valid JSON \(Expecting property name"):
        config.load_input_data_config({})
    (tmp_path / "input/config/inputdataconfig.json").write_text('["train"]')
    with pytest.raises(ConfigError, match=r"inputdataconfig\.json must map each channel name to an object"):
        config.load_input_data_config({})


def test_env_copy_of_inputdataconfig_wins():
    doc, source = config.load_input_data_config({"SM_INPUT_DATA_CONFIG": '{"train": {}}'})
    assert (doc, source) == ({"train": {}}, "SM_INPUT_DATA_CONFIG")


def test_channels(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    cfg = {"train": {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key"},
           "validation": {"TrainingInputMode": "File"}}
    train = config.channel("train", cfg, "src", {}, required=True)
    assert train == config.Channel("train", "Pipe", "ShardedByS3Key", str(tmp_path / "input/data/train"))
    assert train.is_pipe
    # SageMaker's own local mode writes no S3DistributionType: the default applies.
    assert config.channel("validation", cfg, "src", {"SM_CHANNEL_VALIDATION": "/v"}, True) == config.Channel(
        "validation", "File", "FullyReplicated", "/v")
    assert config.channel("init", cfg, "src", {}, required=False) is None
    with pytest.raises(ConfigError) as info:
        config.channel("manifest", cfg, "src.json", {}, required=True)
    assert str(info.value) == ("channel 'manifest' is missing from src.json (it has: train, validation); "
                               "pass a 'manifest' input to the training job")
    with pytest.raises(ConfigError, match="channel 'train' has TrainingInputMode 'Stream'; use one of File, Pipe, FastFile"):
        config.channel("train", {"train": {"TrainingInputMode": "Stream"}}, "src", {}, True)
    with pytest.raises(ConfigError, match="S3DistributionType 'Sharded'; use one of FullyReplicated, ShardedByS3Key"):
        config.channel("train", {"train": {"S3DistributionType": "Sharded"}}, "src", {}, True)
    with pytest.raises(ConfigError) as info:
        config.channel("train", {"train": {"TrainingInputMode": "Pipe", "RecordWrapperType": "RecordIO"}},
                       "src", {}, True)
    assert str(info.value) == ("src: channel 'train' has RecordWrapperType 'RecordIO'; the channel must carry "
                               "the TFRecord shards unchanged: drop record_wrapping from its TrainingInput")


# --- Hosts ---------------------------------------------------------------------------------------
def test_hosts_from_env_sorted(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))  # no resourceconfig.json there
    hosts = config.load_hosts({"SM_HOSTS": '["algo-2","algo-1"]', "SM_CURRENT_HOST": "algo-2"})
    assert (hosts.hosts, hosts.index, hosts.count) == (("algo-1", "algo-2"), 1, 2)
    with pytest.raises(ConfigError, match=r"current host 'algo-9' is not among hosts \['algo-1'\]"):
        config.load_hosts({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-9"})
    assert config.load_hosts({}) == config.Hosts("algo-1", ("algo-1",))


def test_this_hosts_resourceconfig_wins_over_the_environment(tmp_path, monkeypatch):
    """SageMaker's mpirun exports the first host's SM_* to every rank: on algo-3 the
    environment says algo-1, the host's own resourceconfig.json says algo-3."""
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    cfg = tmp_path / "input" / "config"
    cfg.mkdir(parents=True)
    (cfg / "resourceconfig.json").write_text(json.dumps(local.resource_config("algo-3", ["algo-1", "algo-3"], "x")))
    env = {"SM_HOSTS": '["algo-1","algo-3"]', "SM_CURRENT_HOST": "algo-1"}
    assert config.load_hosts(env) == config.Hosts("algo-3", ("algo-1", "algo-3"))
    (cfg / "resourceconfig.json").write_text('{"hosts": []}')
    with pytest.raises(ConfigError, match=r"resourceconfig.json is unreadable or lacks hosts/current_host \(KeyError"):
        config.load_hosts(env)


# --- The whole job, from the environment the local runner's contract writer produces ----------
def _job_env(tmp_path, input_data_config, hyperparameters=None):
    hps = hyperparameters or {"epochs": "3", "model_dir": '"/opt/ml/model"', "sagemaker_program": '"train.py"'}
    spec = dict(current_host="algo-2", hosts=["algo-1", "algo-2"], instance_type="ml.c5.xlarge",
                hyperparameters=hps, input_data_config=input_data_config)
    local.write_training_tree(tmp_path, **spec)
    env = local.training_environment(tmp_path, job_name="j", **spec)
    argv = local.user_command("python", hps, tmp_path)[2:]
    return env, argv


def test_load_from_the_toolkit_environment(tmp_path):
    env, argv = _job_env(tmp_path, {
        "train": {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key"},
        "validation": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"},
        "manifest": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"},
    })
    job = config.load(argv, env)
    assert job.hp.epochs == 3
    assert job.hosts == config.Hosts("algo-2", ("algo-1", "algo-2"))
    assert job.train == config.Channel("train", "Pipe", "ShardedByS3Key", str(tmp_path / "input/data/train"))
    assert job.validation.directory == str(tmp_path / "input/data/validation")
    assert job.init is None
    assert job.model_dir == str(tmp_path / "model")
    assert job.fifo_dir == str(tmp_path / "input/data")
    assert job.notices == ()  # --model_dir was moved under the tree like SM_MODEL_DIR


def test_load_refuses_a_pipe_manifest_and_notes_what_it_ignores(tmp_path):
    env, argv = _job_env(tmp_path, {"train": {"TrainingInputMode": "File"},
                                    "manifest": {"TrainingInputMode": "Pipe"}})
    with pytest.raises(ConfigError, match="channel 'manifest' must be File mode"):
        config.load(argv, env)
    env, argv = _job_env(tmp_path, {"train": {"TrainingInputMode": "File"},
                                    "manifest": {"TrainingInputMode": "File"}})
    job = config.load([*argv, "--model_dir", "/elsewhere", "--extra", "1"], env)
    assert job.notices == (
        "ignoring unknown arguments --extra 1",
        f"no {contract.CHANNEL_VALIDATION!r} channel: training without validation",
        f"--model_dir /elsewhere ignored: the model goes to {tmp_path / 'model'}",
    )
