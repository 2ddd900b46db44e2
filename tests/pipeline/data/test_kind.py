"""pipeline.data.kind before any job: split folders are splits, not classes; the data's shape
(classes, features, training records) and a training split too small for BatchSize."""

from __future__ import annotations

import pytest

from pipeline.data import kind
from pipeline.data.kind import check_input_data, inspect_input_data
from pipeline.data.shape import DataShape
from pipeline.definition import parameters as P
from pipeline.local.store.storage import LocalStorage


@pytest.fixture
def store(tmp_path):
    storage = LocalStorage(tmp_path / "store")
    for key in ("ants/train/ants/1.jpg", "ants/val/bees/2.jpg", "ants/train/bees/3.jpg",
                "mixed/train/ants/1.jpg", "mixed/cats/2.jpg",
                "tables/train.csv", "tables/Test.csv"):
        storage.put_bytes(b"x,label\n0,1\n" if key.endswith(".csv") else b"0", f"s3://bkt/{key}")
    return storage


def values(uri: str):
    return P.resolve({P.INPUT_DATA_URI: uri}, bucket="bkt", prefix="p")


def test_given_splits_are_an_image_tree_and_split_tables_a_table(store):
    assert check_input_data(store, values("s3://bkt/ants/"), False) == "image"
    assert check_input_data(store, values("s3://bkt/tables/"), False) == "table"


def test_a_top_level_mixing_split_and_class_folders_is_refused_before_any_job(store):
    with pytest.raises(P.ParameterError, match=r"^InputDataUri=s3://bkt/mixed/: InputDataUri mixes split folders "
                                               r"\(train/\) with other folders \(cats/\)"):
        check_input_data(store, values("s3://bkt/mixed/"), False)


# --- The data's shape before any job: classes, features, training records ---------------------
def _tree(storage, prefix, counts):
    """``counts``: relative folder -> images in it (placeholder bytes: only the listing counts)."""
    for folder, count in counts.items():
        for i in range(count):
            storage.put_bytes(b"0", f"s3://bkt/{prefix}/{folder}/{i}.jpg")


def _values(uri, **overrides):
    return P.resolve({P.INPUT_DATA_URI: uri, **overrides}, bucket="bkt", prefix="p")


def test_an_image_trees_classes_and_train_split_come_from_the_listing(tmp_path):
    store = LocalStorage(tmp_path / "store")
    _tree(store, "photos", {"ants": 123, "bees": 122})  # the hymenoptera set's 245 photos
    shape = inspect_input_data(store, _values("s3://bkt/photos/"), False)
    # 15% validation and 15% test (37 each): what the processing step's split leaves.
    assert (shape.kind, shape.class_names, shape.train_records) == ("image", ("ants", "bees"), 171)
    _tree(store, "given", {"train/ants": 100, "train/bees": 90, "val/ants": 20, "val/bees": 15})
    given = inspect_input_data(store, _values("s3://bkt/given/"), False)
    assert given.class_names == ("ants", "bees")
    assert given.train_records == 190 - 29  # val given as is; test carved from train: 15% of 190


def test_a_training_split_too_small_for_the_layout_is_refused_with_what_would_fit(tmp_path):
    store = LocalStorage(tmp_path / "store")
    _tree(store, "photos", {"ants": 123, "bees": 122})
    assert check_input_data(store, _values("s3://bkt/photos/"), False) == "image"  # the defaults fit
    with pytest.raises(P.ParameterError) as info:
        check_input_data(store, _values("s3://bkt/photos/", BatchSize="128"), False)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("BatchSize=128 is larger than the 85 training records each of the 2 ranks "
                              "(TrainingInstanceCount x ProcessesPerHost = 2 x 1) gets")
    assert message.endswith("use -p BatchSize=85 or -p TrainingInstanceCount=1")
    with pytest.raises(P.ParameterError, match=r"use -p BatchSize=21 or -p TrainingInstanceCount=1$"):
        check_input_data(store, _values("s3://bkt/photos/", ProcessesPerHost="4"), False)
    with pytest.raises(P.ParameterError, match=r"use -p BatchSize=42 or -p TrainingInstanceCount=1 "
                                               r"-p ProcessesPerHost=1$"):
        check_input_data(store, _values("s3://bkt/photos/", BatchSize="100", ProcessesPerHost="2"), False)


def test_a_small_local_tables_header_and_label_column_are_read(tmp_path):
    store = LocalStorage(tmp_path / "store")
    rows = ["species,bill,island"] + [f"{'Adelie' if i % 3 else 'Gentoo'},{i},{'Biscoe'}" for i in range(100)]
    rows.insert(5, "NA,1,Dream")  # a row without a label is dropped, as processing drops it
    store.put_bytes("\n".join(rows).encode(), "s3://bkt/penguins/penguins.csv")
    shape = inspect_input_data(store, _values("s3://bkt/penguins/", LabelColumn="species"), False)
    assert (shape.class_names, shape.num_features, shape.train_records) == (("Adelie", "Gentoo"), 2, 70)
    with pytest.raises(P.ParameterError, match=r"BatchSize=64 is larger than the 35 training records .* gets: 70 of "
                                               r"the 100 row\(s\) with a 'species' \(2 classes\) under InputDataUri="):
        check_input_data(store, _values("s3://bkt/penguins/", LabelColumn="species", BatchSize="64"), False)


def test_what_cannot_be_read_before_processing_is_left_to_it(tmp_path, monkeypatch):
    store = LocalStorage(tmp_path / "store")
    store.put_bytes(b"\xff\xfe\x00", "s3://bkt/odd/data.csv")  # not UTF-8 text: processing says so
    assert inspect_input_data(store, _values("s3://bkt/odd/"), False) == DataShape("table")
    store.put_bytes(b"a,label\n1,0\n2,1\n" * 5, "s3://bkt/big/data.csv")
    monkeypatch.setattr(kind, "PRECHECK_TABLE_BYTES", 10)
    assert inspect_input_data(store, _values("s3://bkt/big/"), False) == DataShape("table")


def test_run_local_refuses_a_too_small_training_split_on_its_last_line_before_any_job(tmp_path):
    """As a user meets it: a local folder of 120 photos, BatchSize 64 on the default 2 hosts."""
    import subprocess
    import sys

    for name in ("ants", "bees"):
        (tmp_path / "photos" / name).mkdir(parents=True)
        for i in range(60):  # never decoded before processing: the listing is enough
            (tmp_path / "photos" / name / f"{i:03d}.jpg").write_bytes(b"jpeg")
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(tmp_path / "work"),
                           "-p", f"InputDataUri={tmp_path / 'photos'}/", "-p", "BatchSize=64"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.rstrip().splitlines()[-1]
    assert last.startswith("trainpipe run: error: BatchSize=64 is larger than the 42 training records each of "
                           "the 2 ranks (TrainingInstanceCount x ProcessesPerHost = 2 x 1) gets: 84 of the 120 image(s)")
    assert last.endswith("use -p BatchSize=42 or -p TrainingInstanceCount=1")
    assert "Traceback" not in done.stderr and "PreprocessData" not in done.stdout + done.stderr  # no job ran
    assert not list((tmp_path / "work").glob("runs/*/jobs/*"))


def test_a_model_file_on_a_table_of_typed_columns_is_refused_before_any_job(tmp_path):
    """Typed columns (a categorical column, or a gap) train with the encoding inside the model
    (mlp); a model file takes a float vector, and the job would refuse it after processing."""
    store = LocalStorage(tmp_path / "store")
    numbers = ["species,bill,mass"] + [f"{'Adelie' if i % 2 else 'Gentoo'},{i},{i * 2}" for i in range(100)]
    store.put_bytes("\n".join(numbers).encode(), "s3://bkt/numbers/data.csv")
    store.put_bytes("\n".join(numbers[:50] + ["Adelie,NA,3"] + numbers[50:]).encode(), "s3://bkt/gap/data.csv")
    store.put_bytes("\n".join(numbers + ["Gentoo,4,Dream"]).encode(), "s3://bkt/words/data.csv")
    assert inspect_input_data(store, _values("s3://bkt/numbers/", LabelColumn="species"), True).typed is False
    assert inspect_input_data(store, _values("s3://bkt/gap/", LabelColumn="species"), False).typed is None  # not looked at
    for table in ("gap", "words"):
        with pytest.raises(P.ParameterError) as info:
            check_input_data(store, _values(f"s3://bkt/{table}/", LabelColumn="species"), True)
        assert str(info.value) == (
            f"--model-file: the table under InputDataUri=s3://bkt/{table}/ has categorical columns or missing "
            "values, which train as typed columns encoded inside the model (ModelArchitecture=mlp), and a model "
            "file takes a float vector; use -p ModelArchitecture=mlp, or give the file a table of numbers with no gaps")
        # The fix it names works: mlp takes typed columns (the model file is then not used).
        assert check_input_data(store, _values(f"s3://bkt/{table}/", LabelColumn="species", ModelArchitecture="mlp"),
                                True) == "table"


def test_a_pytorch_build_on_a_table_of_typed_columns_is_refused_before_any_job(tmp_path):
    """The PyTorch entrypoint reads numbers only: a categorical column or a gap is refused
    before processing, naming the fix; a table of numbers passes."""
    store = LocalStorage(tmp_path / "store")
    numbers = ["label,bill,mass"] + [f"{i % 2},{i},{i * 2}" for i in range(100)]
    store.put_bytes("\n".join(numbers).encode(), "s3://bkt/numbers/data.csv")
    store.put_bytes("\n".join(numbers[:50] + ["1,NA,3"] + numbers[50:]).encode(), "s3://bkt/gap/data.csv")
    assert check_input_data(store, _values("s3://bkt/numbers/", Framework="pytorch"), False) == "table"
    with pytest.raises(P.ParameterError) as info:
        check_input_data(store, _values("s3://bkt/gap/", Framework="pytorch"), False)
    assert str(info.value) == (
        "Framework=pytorch: the table under InputDataUri=s3://bkt/gap/ has categorical columns or missing values, "
        "which train as typed columns encoded inside the model, and the PyTorch entrypoint reads only numbers; "
        "build without -p Framework=pytorch (TensorFlow's mlp takes them), or give it a table of numbers with no gaps")
    # The fix it names works: the TensorFlow build takes the same table.
    assert check_input_data(store, _values("s3://bkt/gap/"), False) == "table"


def test_a_table_without_the_label_column_is_refused_before_any_job_naming_its_uri(tmp_path):
    """Issue 36: the processing job said it, naming its /opt/ml/... copy (a large table too:
    only its header is read)."""
    store = LocalStorage(tmp_path / "store")
    store.put_bytes(b"species,island\nAdelie,Dream\n", "s3://bkt/penguins/penguins.csv")
    with pytest.raises(P.ParameterError) as refused:
        inspect_input_data(store, _values("s3://bkt/penguins/"), False)
    assert str(refused.value) == (
        "InputDataUri: s3://bkt/penguins/penguins.csv has no 'label' column (header: species,island); set "
        "-p LabelColumn=<one of those names> to say which column holds the label")
