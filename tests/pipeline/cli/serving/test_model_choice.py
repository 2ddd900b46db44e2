"""pipeline/cli/serving/model_choice.py: which registered model ``serve`` and ``predict`` take when a
workdir holds a table model and an image model (the README's tour trains both; issue 36).
Driven through the CLI's process, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from pipeline.cli.serving.serve import resolve_model
from pipeline.local.store.registry import Registry
from tests import readme_record
from tests.pipeline.cli.serving.test_serve import _archive
from tests.serving.conftest import (
    IMAGE_CLASSES,
    TABLE_CLASSES,
    encoded_image,
    free_port,
    save_image_model,
    save_table_model,
    start,
    stop,
)

TRAINPIPE = [sys.executable, "-m", "pipeline"]
BOTH = "--model table (digits/1) or --model image (digits/2)"


def _register(workdir: Path, uri: str, kind: str | None) -> None:
    registry = Registry(workdir / "registry.sqlite")
    registry.register(group="digits", approval_status="Approved", model_data_url=uri, region="us-east-1",
                      account="000000000000", created=f"2026-01-0{len(registry.list()) + 1}", request={},
                      metrics={"kind": kind, "metrics": {}} if kind else None)


def _workdir(tmp_path: Path, kinds=("table", "image"), saved: dict | None = None) -> Path:
    """A workdir whose registry holds one package per kind, in order (v1, v2, ...)."""
    work = tmp_path / "w"
    for number, kind in enumerate(kinds, 1):
        _archive(work / "store" / "bucket" / f"v{number}" / "model.tar.gz", (saved or {}).get(kind))
        _register(work, f"s3://bucket/v{number}/model.tar.gz", kind)
    return work


def _trainpipe(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINPIPE, *argv], capture_output=True, text=True, timeout=300, **kwargs)


def test_serve_with_both_kinds_registered_names_the_model_to_pass_in_one_line(tmp_path):
    work = _workdir(tmp_path)
    served = _trainpipe("serve", "--workdir", str(work))
    readme_record.record(served.stderr.strip())  # docs/troubleshooting.md quotes it
    assert served.returncode == 2
    assert served.stderr.strip().splitlines() == [
        f"trainpipe serve: error: the registry holds table (CSV rows) and image models; say which one to "
        f"serve: {BOTH}"]
    body = tmp_path / "body.json"  # JSON fits either kind: predict cannot tell either
    body.write_text("{}")
    predicted = _trainpipe("predict", "--workdir", str(work), str(body))
    assert predicted.returncode == 2 and f"say which one to predict: {BOTH}" in predicted.stderr


def test_a_kind_by_name_and_a_kind_nobody_trained(tmp_path):
    work = _workdir(tmp_path)
    assert "digits/1" in resolve_model(work, "table")[1] and "digits/2" in resolve_model(work, "image")[1]
    assert "digits/1" in resolve_model(work, wanted="table")[1]
    only_tables = _workdir(tmp_path / "t", kinds=("table",))
    photo = tmp_path / "a.png"
    photo.write_bytes(b"png")
    refused = _trainpipe("predict", "--workdir", str(only_tables), str(photo))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "trainpipe predict: error: no image model is registered (the registry holds table (CSV rows) "
        "models: --model table (digits/1)); train one on image data, or pass --model")
    # A package whose report does not say its kind (a pipeline of the user's own): the newest.
    unknown = _workdir(tmp_path / "u", kinds=(None, None))
    assert "digits/2" in resolve_model(unknown, wanted="image")[1]


@pytest.mark.slow
def test_predict_sends_each_file_to_its_kind_and_serve_takes_the_kind_named(tmp_path):
    """The README's own next commands after its tour: ``predict new-rows.csv digit.png``,
    ``serve --model table --access-log`` with ``curl text/csv``, and ``predict --json | head``."""
    saved = {"table": Path(save_table_model(str(tmp_path / "table"))),
             "image": Path(save_image_model(str(tmp_path / "image")))}
    work = _workdir(tmp_path, saved=saved)
    rows, photo = tmp_path / "new-rows.csv", tmp_path / "digit.png"
    rows.write_text("a,b,c,d\n5.1,3.5,1.4,0.2\n6.7,3.0,5.2,2.3\n")
    photo.write_bytes(encoded_image("png"))

    printed = _trainpipe("predict", "--workdir", str(work), "--json", str(rows), str(photo))
    assert printed.returncode == 0, printed.stderr
    answers = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [a["input"] for a in answers] == [f"{rows}:1", f"{rows}:2", str(photo)]
    assert {a["class"] for a in answers[:2]} <= set(TABLE_CLASSES) and answers[2]["class"] in IMAGE_CLASSES
    assert "model-package/digits/1" in printed.stderr and "model-package/digits/2" in printed.stderr

    # The reader stops after one line: no BrokenPipeError traceback, the status a shell gives `cat`.
    # (20,000 answers are far more than a pipe holds, so the writer surely meets the closed end.)
    many = tmp_path / "many.csv"
    many.write_text("5.1,3.5,1.4,0.2\n" * 20_000)
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", " ".join([*TRAINPIPE, "predict", "--workdir", str(work), "--json",
                                                   str(many), "|", "head", "-1"])],
        capture_output=True, text=True, timeout=300)
    assert len(piped.stdout.splitlines()) == 1 and json.loads(piped.stdout)["input"] == f"{many}:1"
    assert "Traceback" not in piped.stderr and "BrokenPipeError" not in piped.stderr, piped.stderr
    assert piped.returncode == 141

    port = free_port()
    server = start([*TRAINPIPE, "serve", "--workdir", str(work), "--model", "table", "--port", str(port),
                    "--access-log"], port)
    answer = requests.post(server.url + "/invocations", data=rows.read_text(),
                           headers={"Content-Type": "text/csv"}, timeout=30)
    assert answer.status_code == 200 and len(answer.json()["predictions"]) == 2
    code, out = stop(server)
    assert code == 0, out
    assert "model-package/digits/1" in out
    assert '"POST /invocations HTTP/1.1" 200' in out, out


def _scored(workdir: Path, uri: str, status: str, accuracy: float, created: str) -> None:
    _archive(workdir / "store" / uri[len("s3://"):])
    Registry(workdir / "registry.sqlite").register(
        group="digits", approval_status=status, model_data_url=uri, region="us-east-1", account="000000000000",
        created=created, request={}, metrics={"kind": "table", "metrics": {"accuracy": {"value": accuracy}}})


def _chosen(work: Path, tmp_path: Path, *model: str) -> str:
    """The line predict prints on which model it took (the dummy model then fails to load)."""
    rows = tmp_path / "rows.csv"
    rows.write_text("5.1,3.5,1.4,0.2\n")
    printed = _trainpipe("predict", "--workdir", str(work), *model, str(rows))
    return next(line for line in printed.stderr.splitlines() if line.startswith("trainpipe predict: "))


def test_predict_takes_the_approved_then_the_most_accurate_model_not_the_newest(tmp_path):
    """Issue 49: a plain run after a tuned one registered a worse model, and predict and serve
    answered with it because it was newer."""
    work = tmp_path / "w"
    _scored(work, "s3://bucket/tuned/model.tar.gz", "PendingManualApproval", 0.981, "2026-01-01")
    _scored(work, "s3://bucket/plain/model.tar.gz", "PendingManualApproval", 0.904, "2026-01-02")
    line = _chosen(work, tmp_path)
    assert line.startswith("trainpipe predict: model package arn:aws:sagemaker:us-east-1:000000000000:"
                           "model-package/digits/1 (digits/1 (PendingManualApproval, accuracy 0.981): none "
                           "Approved, the highest accuracy of 2 table model(s); --model N takes another "
                           "(trainpipe models)) s3://bucket/tuned/model.tar.gz: "), line
    assert "model-package/digits/1 " in _chosen(work, tmp_path, "--model", "table")
    # An Approved version comes first, as deploy takes it, however accurate the others.
    _scored(work, "s3://bucket/approved/model.tar.gz", "Approved", 0.95, "2026-01-03")
    _scored(work, "s3://bucket/newest/model.tar.gz", "PendingManualApproval", 0.99, "2026-01-04")
    line = _chosen(work, tmp_path)
    assert "model-package/digits/3 (digits/3 (Approved, accuracy 0.95): the one Approved of 4 table model(s)" in line
    # A version named is taken as named.
    assert "model-package/digits/2 (PendingManualApproval) " in _chosen(work, tmp_path, "--model", "2")


def test_serve_takes_the_same_model_as_predict_and_says_why(tmp_path):
    """Issue 49, for serve: it took the newest version too. The line it prints names the
    most accurate one, and why (the dummy model then fails to load: no server starts)."""
    work = tmp_path / "w"
    _scored(work, "s3://bucket/tuned/model.tar.gz", "PendingManualApproval", 0.981, "2026-01-01")
    _scored(work, "s3://bucket/plain/model.tar.gz", "PendingManualApproval", 0.904, "2026-01-02")
    served = _trainpipe("serve", "--workdir", str(work), "--port", str(free_port()))
    line = next(ln for ln in served.stderr.splitlines() if ln.startswith("trainpipe serve: "))
    assert line.startswith("trainpipe serve: model package arn:aws:sagemaker:us-east-1:000000000000:model-package/"
                           "digits/1 (digits/1 (PendingManualApproval, accuracy 0.981): none Approved, the highest "
                           "accuracy of 2 table model(s); --model N takes another (trainpipe models)) "
                           "s3://bucket/tuned/model.tar.gz: "), line
    # Of two as accurate, the newer (docs/serving.md: "then the newest").
    _scored(work, "s3://bucket/retuned/model.tar.gz", "PendingManualApproval", 0.981, "2026-01-03")
    served = _trainpipe("serve", "--workdir", str(work), "--port", str(free_port()))
    assert "model-package/digits/3 (digits/3 (PendingManualApproval, accuracy 0.981)" in served.stderr, served.stderr
