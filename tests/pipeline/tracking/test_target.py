"""Where an execution's MLflow runs go: the flag, MLflow's own variable, the embedded store."""

from __future__ import annotations

from pathlib import Path

from pipeline.tracking import target as T


def test_the_flag_wins_over_the_environment_and_the_embedded_store_is_the_default(tmp_path):
    env = {T.ENV_VAR: "http://team-server:5000"}
    assert T.resolve("http://127.0.0.1:5001", tmp_path, env).uri == "http://127.0.0.1:5001"
    assert T.resolve(None, tmp_path, env).uri == "http://team-server:5000"
    default = T.resolve(None, tmp_path, {})
    assert default.embedded and default.uri == f"sqlite:///{tmp_path.resolve() / T.EMBEDDED_DB}"
    assert default.artifact_location == (tmp_path.resolve() / T.EMBEDDED_ARTIFACTS).as_uri()


def test_off_logs_nothing_either_way(tmp_path):
    assert T.resolve("off", tmp_path, {}) is None
    assert T.resolve(None, tmp_path, {T.ENV_VAR: "OFF"}) is None
    assert T.resolve(None, tmp_path, {T.SWITCH_ENV_VAR: "off", T.ENV_VAR: "http://x:5000"}) is None
    # The flag still wins over the switch: a test of tracking in a suite that turns it off.
    assert T.resolve("http://x:5000", tmp_path, {T.SWITCH_ENV_VAR: "off"}).uri == "http://x:5000"


def test_the_ui_command_and_run_links(tmp_path, monkeypatch):
    import shutil
    import sys

    default = T.embedded(Path(tmp_path))
    monkeypatch.setattr(shutil, "which", lambda name: f"/somewhere/bin/{name}")
    assert default.ui_command() == f"mlflow ui --backend-store-uri {default.uri}"
    # .venv/bin/trainpipe with the venv not activated: the mlflow beside its Python.
    monkeypatch.setattr(shutil, "which", lambda name: None)
    beside = Path(sys.executable).parent / "mlflow"
    assert beside.is_file()
    assert default.ui_command() == f"{beside} ui --backend-store-uri {default.uri}"
    assert default.run_link("3", "abc") == f"{T.UI_DEFAULT}/#/experiments/3/runs/abc"
    server = T.Target("http://127.0.0.1:5005/", embedded=False)
    assert server.run_link("3", "abc") == "http://127.0.0.1:5005/#/experiments/3/runs/abc"
    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
    managed = T.Target(arn, embedded=False)
    assert managed.is_arn and managed.is_server
    assert "create-presigned-mlflow-tracking-server-url --tracking-server-name team" in managed.ui_command()


# --- SDK v3's Pipeline(mlflow_config=...) ---------------------------------------------------
# What v3 writes at the definition's top (aws/sagemaker-python-sdk a24812666,
# sagemaker-mlops/src/sagemaker/mlops/workflow/pipeline.py: Pipeline.definition() puts
# "MlflowConfig": _convert_mlflow_config_to_request(self.mlflow_config), null without one).
ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
V3_CONFIG = {"MlflowResourceArn": ARN, "MlflowExperimentName": "digits-team"}


def test_a_v3_definitions_mlflow_config_is_the_target_after_the_flag(tmp_path, monkeypatch):
    definition = {"Version": "2020-12-01", "MlflowConfig": V3_CONFIG, "Steps": []}
    env = {T.ENV_VAR: "http://team-server:5000"}
    # Where the plugin that reaches an ARN is installed (this venv has none: see the CLI test).
    monkeypatch.setattr(T.importlib.util, "find_spec", lambda name: object() if name == T.ARN_PLUGIN_MODULE else None)
    target = T.resolve(None, tmp_path, env, definition)
    assert (target.uri, target.experiment, target.embedded) == (ARN, "digits-team", False)
    assert T.resolve("http://127.0.0.1:5001", tmp_path, env, definition).uri == "http://127.0.0.1:5001"
    assert T.resolve(None, tmp_path, {T.SWITCH_ENV_VAR: "off"}, definition) is None
    # v3 without mlflow_config: null, and the usual order.
    assert T.resolve(None, tmp_path, env, {**definition, "MlflowConfig": None}).uri == "http://team-server:5000"


def test_a_v3_mlflow_config_this_machine_cannot_log_to_is_refused_in_one_line(tmp_path):
    import pytest

    from pipeline.errors import UserError

    with pytest.raises(UserError, match=r"pass --tracking-uri URL\|off") as refused:
        T.resolve(None, tmp_path, {}, {"MlflowConfig": {**V3_CONFIG, "MlflowResourceArn": {"Get": "Parameters.Arn"}}})
    assert "a pipeline variable" in str(refused.value)
    with pytest.raises(UserError, match="is not a SageMaker MLflow tracking server ARN"):
        T.resolve(None, tmp_path, {}, {"MlflowConfig": {**V3_CONFIG, "MlflowResourceArn": "http://x"}})


def test_the_links_are_routes_of_the_installed_mlflow_ui():
    """Issue 49: MLflow 3's UI opened on its GenAI view ("Traces: 0"), where no run of ours shows.
    The links printed are routes of the installed UI itself (its hash router's table): an
    experiment's runs tab, a run's page, and the workflowType value that picks the
    machine-learning view, read from the link before the UI's remembered (GenAI) default."""
    import mlflow

    bundle = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    text = "".join(p.read_text(errors="replace") for p in bundle.glob("*.js"))
    assert "createHashRouter" in text  # hence the links' '/#/'
    assert '"/experiments/:experimentId/runs"' in text and '"/experiments/:experimentId/runs/:runUuid"' in text
    key, value = T.UI_RUNS_VIEW.split("=")
    assert f'e.MACHINE_LEARNING="{value}"' in text and f'get("{key}")' in text
    target = T.resolve(None, Path("w"), {})
    assert target.experiment_link("7") == f"{T.UI_DEFAULT}/#/experiments/7/runs?{T.UI_RUNS_VIEW}"
    assert target.run_link("7", "abc") == f"{T.UI_DEFAULT}/#/experiments/7/runs/abc"
