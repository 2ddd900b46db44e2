"""The table-of-typed-columns model: encoding inside the model, and both serving signatures."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from training_entry.model import tabular
from training_entry.model.network import save_for_serving

SCHEMA = (
    {"name": "island", "key": "island", "type": "categorical", "vocabulary": ["", "Biscoe", "Dream"]},
    {"name": "bill", "key": "bill", "type": "numeric", "mean": 40.0, "std": 2.0},
    {"name": "owner", "key": "owner", "type": "hashed", "bins": 64},
    {"name": "id", "key": "id", "type": "categorical", "vocabulary": [], "dropped": True},
)


def test_numeric_columns_are_imputed_with_the_train_mean_and_flagged():
    out = tabular.NumericEncoding(40.0, 2.0)(tf.constant([44.0, np.nan, np.inf])).numpy()
    assert out.tolist() == [[2.0, 0.0], [0.0, 1.0], [0.0, 1.0]]


def test_categorical_missing_is_a_value_of_its_own_and_unknown_values_share_a_bucket():
    model = tabular.build_tabular_model(SCHEMA, 2)
    lookup = model.get_layer("island_vocabulary")
    text = model.get_layer("island_missing")(tf.constant(["Dream", "NA", "", "Mars", "Venus"]))
    hot = lookup(text).numpy()
    assert text.numpy().tolist() == [b"Dream", b"", b"", b"Mars", b"Venus"]
    # index 0: out of vocabulary; "" (missing) has its own index, distinct from OOV.
    assert hot.argmax(1).tolist() == [3, 1, 1, 0, 0]
    assert sorted(model.input) == ["bill", "island", "owner"]  # the dropped column is no input


def test_both_signatures_answer_probabilities_and_class_names(tmp_path):
    model = tabular.build_tabular_model(SCHEMA, 3)
    rng = np.random.default_rng(0)
    islands = rng.choice(["Biscoe", "Dream", "NA"], 300)
    y = np.array([{"Biscoe": 0, "Dream": 1, "NA": 2}[i] for i in islands])
    x = {"island": tf.constant(islands), "bill": tf.constant(rng.normal(40, 2, 300), tf.float32),
         "owner": tf.constant(rng.choice(["ann", "bob"], 300))}
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=30, batch_size=32, verbose=0)
    names = ("Adelie", "Chinstrap", "Gentoo")
    # As training exports it: save_for_serving keeps the table's own classes outputs.
    path = save_for_serving(model, str(tmp_path), "1", class_names=names,
                            signatures=tabular.tabular_signatures(model, SCHEMA, names))
    loaded = tf.saved_model.load(path)
    csv = loaded.signatures[tabular.SIGNATURE_CSV](csv_lines=tf.constant(["Dream,41,zed,1", "null,,ann,x"]))
    assert [c.decode() for c in csv["classes"].numpy()] == ["Chinstrap", "Gentoo"]
    default = loaded.signatures["serving_default"](island=tf.constant(["Biscoe"]), bill=tf.constant([np.nan]),
                                                   owner=tf.constant([""]))
    assert default["classes"].numpy().tolist() == [b"Adelie"]
    assert default["probabilities"].shape == (1, 3)
