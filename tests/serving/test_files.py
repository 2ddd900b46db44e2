"""Which model archives trainpipe's serving answers (``serving/files.py``)."""

from __future__ import annotations

import io
import tarfile

import pytest

from serving.files import answerable_archive


def _archive(path, names: list[str]):
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return path


@pytest.mark.parametrize(("names", "answerable"), [
    (["1/saved_model.pb", "1/variables/variables.index"], True),  # the TensorFlow room's
    (["saved_model.pb"], True),  # a SavedModel at the top
    (["model.pt", "metadata.json", "code/inference.py"], True),  # the PyTorch room's
    (["xgboost-model"], False),  # SageMaker's built-in XGBoost algorithm
    (["a/b/saved_model.pb"], False),  # not where serving looks
], ids=["savedmodel", "top-level", "torchscript", "xgboost", "too-deep"])
def test_an_archive_is_answerable_when_it_holds_a_model_serving_reads(tmp_path, names, answerable):
    assert answerable_archive(_archive(tmp_path / "model.tar.gz", names)) is answerable


def test_a_file_that_is_no_archive_is_not_answerable(tmp_path):
    (tmp_path / "model.tar.gz").write_bytes(b"not a tar")
    assert answerable_archive(tmp_path / "model.tar.gz") is False
    assert answerable_archive(tmp_path / "missing.tar.gz") is False
