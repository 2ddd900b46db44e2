"""A local file or folder given to an s3:// parameter (`run --local -p InputDataUri=~/photos/`):
copied into the store once under a prefix named by its content, and said where
(pipeline/cli/local/data.py); refused in one line where it cannot be used."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pipeline.cli.local import data as local_data
from pipeline.cli.main import main
from pipeline.definition import parameters as P
from pipeline.local.store.storage import LocalStorage
from tests import readme_record

SETTINGS = SimpleNamespace(bucket="my-bucket", prefix="trainpipe")


def photos(root, extra: dict | None = None):
    folder = root / "photos"
    for name, data in {"ants/a.jpg": b"ant", "bees/b.jpg": b"bee", **(extra or {})}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_a_local_folder_is_copied_once_under_a_prefix_named_by_its_content(tmp_path):
    folder = photos(tmp_path)
    store = LocalStorage(tmp_path / "store")
    said: list[str] = []

    def place(value):
        overrides = {P.INPUT_DATA_URI: value, P.EPOCHS: "1"}
        found = local_data.find_local_data(overrides, SETTINGS)
        local_data.copy_local_data(store, found, said.append)
        return overrides

    overrides = place(f"{folder}/")
    uri = overrides[P.INPUT_DATA_URI]
    assert uri.startswith("s3://my-bucket/trainpipe/uploads/photos-") and uri.endswith("/")
    assert overrides[P.EPOCHS] == "1"  # other parameters untouched
    assert store.list(uri) == [uri + "ants/a.jpg", uri + "bees/b.jpg"]
    assert said == [f"-p InputDataUri: {folder}/ copied to {uri} (2 of 2 object(s) written)"]
    # A re-run (a file:// URI names the same folder) finds it there and copies nothing.
    assert place(f"file://{folder}")[P.INPUT_DATA_URI] == uri
    assert said[-1] == f"-p InputDataUri: {folder}/ is already in the store at {uri} (2 object(s))"
    # Changed data gets a prefix of its own; the old one is left as it was.
    changed = place(str(photos(tmp_path, {"bees/c.jpg": b"bee 2"})))[P.INPUT_DATA_URI]
    assert changed != uri and len(store.list(changed)) == 3 and len(store.list(uri)) == 2


def test_a_local_file_is_copied_into_a_folder_of_its_own(tmp_path):
    table = tmp_path / "penguins.csv"
    table.write_text("a,label\n1,0\n")
    overrides = {P.INPUT_DATA_URI: str(table)}
    found = local_data.find_local_data(overrides, SETTINGS)
    store = LocalStorage(tmp_path / "store")
    local_data.copy_local_data(store, found, lambda line: None)
    uri = overrides[P.INPUT_DATA_URI]
    assert uri.startswith("s3://my-bucket/trainpipe/uploads/penguins.csv-")
    assert store.list(uri) == [uri + "penguins.csv"]


def test_s3_uris_and_other_parameters_are_left_alone(tmp_path):
    overrides = {P.INPUT_DATA_URI: "s3://b/data/", P.BATCH_SIZE: "8"}
    assert local_data.find_local_data(overrides, SETTINGS) == {}
    assert overrides == {P.INPUT_DATA_URI: "s3://b/data/", P.BATCH_SIZE: "8"}


def test_run_local_copies_a_local_folder_and_the_run_reads_it_from_there(tmp_path, capsys):
    data = tmp_path / "table"
    data.mkdir()
    (data / "t.csv").write_text("a,b,label\n1,2,0\n3,4,1\n")
    # An architecture that does not fit a table: refused by the data check that lists the
    # store before any job, so the copy is seen without training anything.
    argv = ["run", "--local", "--workdir", str(tmp_path / "w"), "-p", f"InputDataUri={data}/",
            "-p", "ModelArchitecture=mobilenet_v2"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    copied = [line for line in out.splitlines() if line.startswith("-p InputDataUri: ")]
    assert len(copied) == 1 and " copied to s3://" in copied[0]
    uri = copied[0].split(" copied to ")[1].split(" ")[0]
    assert f"does not fit the table data under InputDataUri={uri};" in err
    assert LocalStorage(tmp_path / "w" / "store").list(uri) == [uri + "t.csv"]


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: tmp / "absent", "-p InputDataUri=…/absent: no such file or directory; give an s3:// "
                                 "URI, or a local file or folder to copy into the store"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty",
     "-p InputDataUri=…/empty: the folder holds no files (symbolic links are not followed); "
     "give the folder that holds the data"),
])
def test_a_local_path_that_holds_nothing_is_refused_in_one_line(make, message, tmp_path, capsys):
    path = make(tmp_path)
    assert main(["run", "--local", "--workdir", str(tmp_path / "w"), "-p", f"InputDataUri={path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "trainpipe run: error: " + message.replace("…", str(tmp_path))
    assert not (tmp_path / "w" / "runs").exists() and not (tmp_path / "w" / "store").exists()


def test_outside_run_local_a_local_path_is_refused_with_the_fix():
    with pytest.raises(P.ParameterError) as refused:
        P.resolve({P.INPUT_DATA_URI: "/data/photos/"}, bucket="my-bucket", prefix="trainpipe")
    assert str(refused.value) == (
        "InputDataUri='/data/photos/': must be an s3:// URI; copy the data to S3 first (e.g. aws s3 "
        "sync /data/photos/ s3://my-bucket/trainpipe/uploads/) and pass that URI (only `trainpipe "
        "run --local` copies a local path itself)")


# --- A refusal about a parameter, in the user's terms, on the last line -------------------------
# What a rank of trainpipe's entry point writes when the batch is larger than its records
# (training_entry/input/plan.py's words), with the batch size the job was given.
REFUSAL = ("channel 'train': batch-size {batch} is larger than the 10 records rank 0 reads per epoch "
           "(1 shard(s)); lower batch-size to at most 10 or give each rank more records [rank 0 of 1 on algo-1]")
TRAIN_SCRIPT = f"""
import json, os, pathlib, sys
base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
batch = json.loads((base / "input/config/hyperparameters.json").read_text())["batch-size"]
(base / "output" / "failure").write_text({REFUSAL!r}.format(batch=batch))
sys.exit(1)
"""


def test_a_failed_run_ends_with_the_refusal_naming_the_pipeline_parameter(tmp_path, capsys):
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    code = f"s3://{BUCKET}/code/sourcedir.tar.gz"
    put_code(LocalStorage(tmp_path / "w" / "store"), code, {"train.py": TRAIN_SCRIPT})
    request = training_request(code, program="train.py")
    # As the SDK writes a pipeline parameter into a hyperparameter (trainpipe's definition too).
    request["HyperParameters"]["batch-size"] = {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.BatchSize"}]}}
    definition = {"Version": "2020-12-01",
                  "Parameters": [{"Name": "BatchSize", "Type": "Integer", "DefaultValue": 32}],
                  "Steps": [{"Name": "TrainModel", "Type": "Training", "Arguments": request}]}
    (tmp_path / "p.json").write_text(json.dumps(definition))
    assert main(["run", "--local", "--quiet", "--workdir", str(tmp_path / "w"),
                 "--definition", str(tmp_path / "p.json"), "-p", "BatchSize=64"]) == 1
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1]
    assert last.endswith(": channel 'train': -p BatchSize=64 is larger than the 10 records rank 0 "
                         "reads per epoch (1 shard(s)); lower -p BatchSize to at most 10 or give each "
                         "rank more records")
    assert "batch-size" not in last


def test_a_stray_gif_in_a_local_image_tree_is_refused_before_anything_is_copied(tmp_path):
    """Issue 36: the refusal came after 398 photos were copied into the store, under a header
    naming a run folder that was never created. Through the CLI's process, as a user runs it."""
    import subprocess
    import sys

    folder = photos(tmp_path, {"bees/party.gif": b"GIF89a"})
    work = tmp_path / "w"
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(work),
                             "-p", f"InputDataUri={folder}"], capture_output=True, text=True, timeout=300)
    readme_record.record(result.stderr.strip())  # docs/troubleshooting.md quotes it
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"trainpipe run: error: -p InputDataUri={folder}: bees/party.gif is not a .jpg/.jpeg/.png image but "
        f"sits in the image tree (1 such file(s)); convert it to JPEG/PNG or move it out of InputDataUri")
    assert not (work / "store").exists() and not (work / "runs").exists()
    assert "run directory" not in result.stdout + result.stderr


def test_a_csv_without_the_label_column_is_refused_before_any_job_naming_the_users_file(tmp_path):
    """Issue 36: it was caught inside the job, named /opt/ml/..., printed 4 times."""
    import subprocess
    import sys

    table = tmp_path / "penguins" / "penguins.csv"
    table.parent.mkdir()
    table.write_text("species,island,bill_length_mm\nAdelie,Dream,39.1\nGentoo,Biscoe,47.5\n")
    work = tmp_path / "w"
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(work),
                             "-p", f"InputDataUri={table.parent}/"], capture_output=True, text=True, timeout=300)
    readme_record.record(result.stderr.strip())  # docs/troubleshooting.md quotes it
    assert result.returncode == 2
    message = (f"trainpipe run: error: -p InputDataUri={table.parent}/: {table} has no 'label' column (header: "
               f"species,island,bill_length_mm); set -p LabelColumn=<one of those names> to say which column "
               f"holds the label")
    assert result.stderr.strip().splitlines()[-1] == message
    assert (result.stdout + result.stderr).count("has no 'label' column") == 1
    assert not (work / "store").exists() and not (work / "runs").exists()
