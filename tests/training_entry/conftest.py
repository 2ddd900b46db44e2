"""Fixtures shared by the training entry point's tests."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from training_entry.input import records

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def native_records(tmp_path_factory):
    """The native reader, built from this tree's source with the install step's own script
    (``scripts/build_native.sh``) for the Python running the tests."""
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler: the native reader cannot be built here (the Python reader is tested)")
    out = tmp_path_factory.mktemp("native")
    built = subprocess.run(["bash", str(REPO / "scripts" / "build_native.sh"), sys.executable, str(out)],
                           capture_output=True, text=True, check=True).stdout.strip()
    spec = importlib.util.spec_from_file_location(records.NATIVE_MODULE, built)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["python", "native"])
def reader(request, monkeypatch):
    """Run the test once with each TFRecord reader: they must behave the same."""
    module = request.getfixturevalue("native_records") if request.param == "native" else None
    monkeypatch.setattr(records, "native", module)
    return request.param
