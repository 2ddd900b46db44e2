"""Typed columns (processing.columns, columns_step): label mapping, missing values, column
types and encodings, refusals, and no leak from validation/test into the train statistics."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from processing import columns
from processing.preprocess import main
from processing.rawdata import label_classes
from training_entry.input import records


def write(ml, text: str, name: str = "data.csv"):
    path = ml.raw_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def table(count: int, seed: int = 0, label_first: bool = True) -> str:
    rng = np.random.default_rng(seed)
    lines = ["kind,color,size,note" if label_first else "color,size,note,kind"]
    for i in range(count):
        kind = ["cat", "dog", "emu"][i % 3]
        color = "NA" if i % 17 == 0 else ["red", "green", "blue"][i % 3]
        size = "" if i % 19 == 0 else f"{rng.normal(i % 3, 0.1):.3f}"
        cells = [color, size, "same"]
        lines.append(",".join([kind, *cells] if label_first else [*cells, kind]))
    return "\n".join(lines) + "\n"


def manifest(ml, split="train") -> records.Manifest:
    return ml.manifest(split)


def typed_records(ml, split: str) -> list[dict]:
    out = []
    for shard in sorted(ml.outputs[split].glob("*.tfrecord")):
        for payload in records.read_file_records(str(shard)):
            feature = tf.train.Example.FromString(payload).features.feature
            out.append({k: (list(v.float_list.value) or [b.decode() for b in v.bytes_list.value]
                            or list(v.int64_list.value))[0] for k, v in feature.items()})
    return out


# --- Labels ----------------------------------------------------------------------------------
def test_labels_by_name_are_sorted_and_numbers_sort_as_numbers():
    assert label_classes("f", "y", np.array(["dog", "cat", "emu", "cat"]))[0] == ("cat", "dog", "emu")
    names, ids = label_classes("f", "y", np.array(["10", "9", "2", "9"]))
    assert names == ("2", "9", "10") and ids.tolist() == [2, 1, 0, 1]
    names, ids = label_classes("f", "y", np.array(["1", "0", "2"]))
    assert names is None and ids.tolist() == [1, 0, 2]  # already 0..K-1: as today


@pytest.mark.parametrize("label_first", [True, False])
def test_a_label_column_in_any_position_with_string_values(ml, capsys, label_first):
    write(ml, table(60, label_first=label_first))
    assert main(["--label-column", "kind"]) == 0
    m = manifest(ml)
    assert m.class_names == ("cat", "dog", "emu") and m.label_column == "kind"
    assert [c["name"] for c in m.columns] == ["color", "size", "note"]
    out = capsys.readouterr().out
    assert "column 'note' holds one value ('same') in every training row: dropped" in out


def test_rows_without_a_label_are_dropped_and_counted(ml, capsys):
    text = table(60).splitlines()
    text[5] = "NA" + text[5][3:]
    text[9] = "," + text[9].split(",", 1)[1]
    write(ml, "\n".join(text) + "\n")
    assert main(["--label-column", "kind"]) == 0
    assert re.search(r"dropped 2 row\(s\) whose 'kind' is missing \(first at line 6\)", capsys.readouterr().out)
    assert sum(manifest(ml, s).total_records for s in ("train", "validation", "test")) == 58


# --- Columns ---------------------------------------------------------------------------------
def test_missing_values_and_types(ml):
    write(ml, table(90))
    assert main(["--label-column", "kind"]) == 0
    color, size, note = manifest(ml).columns
    assert color["type"] == "categorical" and color["vocabulary"] == ["", "blue", "green", "red"]
    assert size["type"] == "numeric" and size["missing_in_train"] >= 1
    assert note.get("dropped")
    rows = typed_records(ml, "train") + typed_records(ml, "test")
    assert any(np.isnan(r["size"]) for r in rows)  # a gap is NaN in the record, imputed by the model
    assert any(r["color"] == "NA" for r in rows)  # the raw text: the model maps it to missing
    assert "note" not in rows[0]


def test_many_values_are_hashed_and_id_like_columns_dropped(ml, capsys):
    lines = ["y,big,id,x"] + [f"{'ab'[i % 2]},v{i % 1500},row-{i},{i % 7}" for i in range(3000)]
    write(ml, "\n".join(lines) + "\n")
    assert main(["--label-column", "y"]) == 0
    big, ident, x = manifest(ml).columns
    assert big["type"] == "hashed" and big["bins"] == columns.HASH_BINS
    assert ident.get("dropped") and x["type"] == "numeric"
    out = capsys.readouterr().out
    assert re.search(r"column 'big' has 1[0-9]{3} distinct training values \(> 1000\): hashed into 4096 buckets", out)
    assert "column 'id' is ID-like" in out and "dropped" in out


def test_column_keys_are_signature_names():
    taken: set[str] = set()
    assert [columns.column_key(n, i, taken) for i, n in enumerate(["bill (mm)", "bill-mm", "1st", "", "é"])] == [
        "bill_mm", "bill_mm_2", "c_1st", "column_4", "column_5"]


REFUSALS = [
    ("a,b\n1,x\n2,y\n", ["--label-column", "Species"],
     r"data\.csv has no 'Species' column \(header: a,b\); set -p LabelColumn=<one of those names>"),
    ("y,a\ncat,x\ncat,y\ncat,z\n", ["--label-column", "y"],
     r"every row has y = 'cat'; a classifier needs at least 2 classes"),
    ("y,a,b\nc,x,NA\nd,y,\nc,x,?\n", ["--label-column", "y"],
     r"data\.csv: column 'b' is missing in every row; remove the column or fill it in"),
    ("y,a,b\nc,x,1\nd,y\n", ["--label-column", "y"],
     r"data\.csv line 3 has 2 fields but the header has 3; every row needs one value per column"),
]


@pytest.mark.parametrize("text, args, message", REFUSALS)
def test_refusals_name_the_column_or_row_and_write_nothing(ml, text, args, message):
    write(ml, text)
    assert main(args) == 1
    got = ml.message.read_text()
    assert re.search(message, got), got
    assert "\n" not in got and ml.leftovers() == []


# --- No leak ---------------------------------------------------------------------------------
def test_validation_and_test_values_never_reach_the_statistics(ml):
    """Given splits whose validation/test rows hold a category and numbers train never has:
    the vocabulary and the mean are exactly the train file's."""
    train = ["y,c,n"] + [f"{'ab'[i % 2]},{'pq'[i % 2]},{i % 5}" for i in range(40)]
    other = ["y,c,n"] + [f"{'ab'[i % 2]},LEAK,1000000" for i in range(6)]
    write(ml, "\n".join(train) + "\n", "train.csv")
    write(ml, "\n".join(other) + "\n", "validation.csv")
    write(ml, "\n".join(other) + "\n", "test.csv")
    assert main(["--label-column", "y"]) == 0
    c, n = manifest(ml).columns
    assert c["vocabulary"] == ["", "p", "q"]
    assert n["mean"] == pytest.approx(np.mean([i % 5 for i in range(40)]))
    for split in ("validation", "test"):
        assert manifest(ml, split).columns == manifest(ml).columns  # one schema, from train


def test_carved_splits_do_not_leak_either(ml):
    lines = ["y,c,n"] + [f"{'ab'[i % 2]},v{i},{i}" for i in range(24)]
    # Every value distinct but too few rows to be ID-like: the vocabulary shows which rows trained.
    write(ml, "\n".join(lines) + "\n")
    assert main(["--label-column", "y", "--instance-count", "1"]) == 0
    c, n = manifest(ml).columns
    train = typed_records(ml, "train")
    assert c["vocabulary"] == sorted({""} | {r["c"] for r in train})
    assert n["mean"] == pytest.approx(np.mean([r["n"] for r in train]))
    held_out = {r["c"] for s in ("validation", "test") for r in typed_records(ml, s)}
    assert held_out and not held_out & set(c["vocabulary"])


def test_the_manifest_schema_is_json(ml):
    write(ml, table(30))
    assert main(["--label-column", "kind"]) == 0
    doc = json.loads((ml.outputs["manifest"] / "train.json").read_text())
    assert doc["label_column"] == "kind" and doc["columns"][0]["key"] == "color"


def test_a_numeric_table_with_its_label_elsewhere_keeps_float_vector_records(ml):
    rng = np.random.default_rng(0)
    lines = ["f0,label,f2"] + [f"{rng.normal():.3f},{['-1', '5', '7'][i % 3]},{rng.normal():.3f}" for i in range(60)]
    write(ml, "\n".join(lines) + "\n")
    assert main([]) == 0
    m = manifest(ml)
    assert m.columns is None and m.num_features == 2 and m.label_column == "label"
    assert m.class_names == ("-1", "5", "7")  # numbers that are not 0..K-1: classes by value
    x, y = ml.read_split("train")
    assert x.shape[1] == 2 and set(y.tolist()) == {0, 1, 2}
