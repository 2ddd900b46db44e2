"""A table of typed columns (categorical columns, gaps, string labels) under the tf.distribute
entrypoint (training_entry/strategy_train.py): the typed-column model is built, its batches are
one tensor per column, and the export is Horovod's (``serving_csv`` and per-column
``serving_default``, ``probabilities`` + ``classes``). The slow test runs the whole pipeline
with ``--distribution mirrored`` and ``parameter_server`` on 2 simulated hosts (~40 s each):

    .venv/bin/pytest tests/training_entry/test_strategy_train_tables.py -m slow
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from pipeline.local.hosts import mpi
from tests.pipeline.local.test_end_to_end import (
    FAST,
    assert_registered,
    trainpipe,
)
from tests.pipeline.local.test_tables_end_to_end import TWO_HOSTS, answer_raw_csv_lines, evaluation
from tests.processing import mixed_table
from training_entry import config, contract, strategy_train
from training_entry.input import records
from training_entry.model import tabular
from training_entry.run import strategies

SCHEMA = (
    {"name": "island", "key": "island", "type": "categorical", "vocabulary": ["", "Biscoe", "Dream"]},
    {"name": "bill", "key": "bill", "type": "numeric", "mean": 40.0, "std": 2.0},
)
NAMES = ("Adelie", "Chinstrap")


def _data(architecture: str = contract.ARCH_MLP, columns=SCHEMA):
    manifest = SimpleNamespace(columns=columns, num_classes=len(NAMES), class_names=list(NAMES),
                               label_column="species", kind=records.KIND_TABLE, num_features=2,
                               feature_mean=None, feature_std=None)
    return SimpleNamespace(manifest=manifest, architecture=architecture, image_size=None, user_model_file=None)


def _run(name: str) -> strategy_train._Run:
    # One host: the default strategy (a one-host parameter_server job trains as one process).
    return strategy_train._Run(name, tf.distribute.get_strategy(), strategies.Workers(1, 0, True, 1), log=print)


@pytest.mark.parametrize("name", [contract.STRATEGY_MIRRORED, contract.STRATEGY_PARAMETER_SERVER])
def test_a_typed_table_is_built_and_exported_as_horovod_exports_it(tmp_path, name):
    cfg = SimpleNamespace(hp=config.Hyperparameters(), model_dir=str(tmp_path / "model"))
    run, data = _run(name), _data()
    model, _, _ = strategy_train._build(run, cfg, data)
    assert model.name == "table_mlp" and sorted(model.input) == ["bill", "island"]
    strategy_train._export(run, cfg, data, model)
    loaded = tf.saved_model.load(str(tmp_path / "model" / contract.MODEL_VERSION))
    assert set(loaded.signatures) == {contract.SIGNATURE_DEFAULT, tabular.SIGNATURE_CSV}
    answer = loaded.signatures[tabular.SIGNATURE_CSV](csv_lines=tf.constant(["Dream,41", "NA,"]))
    assert {c.decode() for c in answer["classes"].numpy()} <= set(NAMES)
    assert np.allclose(answer[contract.SERVING_OUTPUT].numpy().sum(axis=1), 1.0, atol=1e-5)
    columns = loaded.signatures[contract.SIGNATURE_DEFAULT](island=tf.constant(["Biscoe"]),
                                                             bill=tf.constant([np.nan]))
    assert columns[contract.SERVING_OUTPUT].shape == (1, 2) and columns["classes"].shape == (1,)


def test_a_typed_table_with_another_architecture_is_refused_as_under_horovod():
    with pytest.raises(ValueError, match="train it with ModelArchitecture=mlp"):
        tabular.check_architecture(contract.ARCH_SMALL_CNN, "species")
    data = _data(contract.ARCH_SMALL_CNN, columns=None)  # a numeric table: no typed columns, not refused
    assert strategy_train._build_model(SimpleNamespace(hp=config.Hyperparameters()), data).name != "table_mlp"


@pytest.mark.slow
@pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed")
@pytest.mark.parametrize("distribution", [
    ["--distribution", "mirrored"],
    # ParameterServer: the chief reads no data, so the workers split a fully replicated channel.
    ["--distribution", "parameter_server", "-p", "TrainDistribution=FullyReplicated"],
], ids=["mirrored", "parameter_server"])
def test_a_mixed_csv_registers_and_answers_a_raw_csv_line(tmp_path, distribution):
    mixed_table.write(tmp_path / "store" / "bkt" / "penguins" / "penguins.csv", 3000)
    result = trainpipe("run", "--local", *distribution, "--workdir", str(tmp_path), *FAST,
                       *TWO_HOSTS, "-p", "InputDataUri=s3://bkt/penguins/", "-p", "LabelColumn=species",
                       timeout=900)
    assert_registered(result, tmp_path)
    assert evaluation(tmp_path)["metrics"]["accuracy"]["value"] >= 0.9
    answer_raw_csv_lines(tmp_path)
