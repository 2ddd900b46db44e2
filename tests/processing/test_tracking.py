"""The preprocessing job's MLflow run on SageMaker (processing/tracking.py), through the
entrypoint's main() with the variables `definition --tracking-uri` sets, against a SQLite store
standing in for the tracking server: the data summary (records and shards per split, classes),
logged once by the first host; nothing without the variables."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from pipeline.tracking.logger import place_empty_store
from processing.preprocess import main
from training_entry import contract

from .conftest import MlTree, labelled_data, run_preprocess


@pytest.fixture
def tracked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    place_empty_store(tmp_path / "server.db")
    uri = f"sqlite:///{tmp_path / 'server.db'}"
    for key, value in {"MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": "pipe",
                       contract.TRACKING_EXECUTION_ENV: "exec-1",
                       contract.TRACKING_STEP_ENV: "PreprocessData"}.items():
        monkeypatch.setenv(key, value)
    return MlflowClient(uri)


def test_the_first_host_logs_the_data_summary_once(tracked, tmp_path, monkeypatch):
    hosts = [MlTree(tmp_path / f"ml-{i}") for i in range(2)]
    x, y = labelled_data(per_class=(40, 35, 25), features=5)
    for i, tree in enumerate(hosts):
        tree.write_csv(x, y)
        tree.set_hosts(i, 2)
        assert run_preprocess(tree, monkeypatch, "--instance-count", "2", "--processes-per-host", "2") == 0
    runs = tracked.search_runs([tracked.get_experiment_by_name("pipe").experiment_id])
    (parent,) = [r for r in runs if contract.TRACKING_TAG_PARENT not in r.data.tags]
    (run,) = [r for r in runs if r.data.tags.get(contract.TRACKING_TAG_PARENT) == parent.info.run_id]
    assert run.info.run_name == "PreprocessData" and run.info.status == "FINISHED"
    assert run.data.metrics == {"classes": 3, "records_train": 70, "records_validation": 15, "records_test": 15,
                                "shards_train": 4, "shards_validation": 4, "shards_test": 4}
    assert run.data.params == {"kind": "table", "num_classes": "3", "num_features": "5", "shards_per_split": "4"}


def test_nothing_without_the_definitions_variables(tracked, ml, monkeypatch):
    monkeypatch.delenv(contract.TRACKING_EXECUTION_ENV)
    ml.write_csv(*labelled_data())
    assert main(["--instance-count", "1", "--processes-per-host", "1"]) == 0
    assert tracked.get_experiment_by_name("pipe") is None
