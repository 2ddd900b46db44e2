"""Evaluation of a model of typed columns: scored through serving_default on the raw records,
classes named from the manifest, a class the test split lacks reported with support 0."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from evaluation import report
from evaluation.evaluate import main
from tests.evaluation.conftest import make_archive
from training_entry.input import records, typed_examples
from training_entry.model import tabular

SCHEMA = (
    {"name": "island", "key": "island", "type": "categorical", "vocabulary": ["", "Biscoe", "Dream", "Torgersen"]},
    {"name": "bill", "key": "bill", "type": "numeric", "mean": 0.0, "std": 1.0},
)
NAMES = ("Adelie", "Chinstrap", "Gentoo")


def test_a_typed_table_is_scored_by_class_name_with_absent_classes_at_support_zero(ev, tmp_path):
    islands = np.array(["Biscoe", "Dream", "Torgersen"] * 40)
    y = np.array([0, 1, 2] * 40)
    model = tabular.build_tabular_model(SCHEMA, 3)
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit({"island": tf.constant(islands), "bill": tf.zeros(len(y))}, y, epochs=40, verbose=0)
    model.save(tmp_path / "1", save_format="tf", include_optimizer=False,
               signatures=tabular.tabular_signatures(model, SCHEMA, NAMES))
    make_archive(ev.archive, {"1": tmp_path / "1"})
    encode = typed_examples.Encoder(SCHEMA)
    # No Gentoo in the test split; one record with gaps.
    rows = [(["Biscoe", "0.1"], 0), (["Dream", "NA"], 1), (["Biscoe", ""], 0), (["Dream", "-1"], 1)]
    records.write_records(str(ev.test_dir / records.shard_name("test", 0, 1)), [encode(c, label) for c, label in rows])
    manifest_dir = ev.base / "processing" / "input" / "manifest"
    manifest_dir.mkdir(parents=True)
    manifest = records.Manifest("test", 2, 3, {records.shard_name("test", 0, 1): 4}, class_names=NAMES,
                                label_column="species", columns=SCHEMA)
    (manifest_dir / "test.json").write_text(manifest.to_json())
    assert main([]) == 0
    document = ev.report()
    assert document["metrics"]["accuracy"]["value"] == 1.0
    assert [c["class_name"] for c in document["per_class"].values()] == list(NAMES)
    assert document["per_class"]["2"]["support"] == 0
    assert document[report.CLASS_NAMES_JSON_PATH] == '["Adelie", "Chinstrap", "Gentoo"]'


def test_the_metadata_string_stays_within_its_limit():
    names = [f"class number {i}" for i in range(100)]
    text = report.class_names_metadata(names)
    assert len(text) <= report.METADATA_VALUE_CHARS and text.endswith('more"]')
