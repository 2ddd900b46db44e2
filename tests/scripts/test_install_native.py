"""scripts/install_native.sh: the native TFRecord reader built, cached, installed, and a
failed build leaving Pipe mode on the Python reader with one notice."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install_native.sh"


@pytest.fixture
def bare_venv(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    return tmp_path / "venv" / "bin" / "python"


def _install(python, cache, **env):
    return subprocess.run(["bash", str(SCRIPT), str(python)], capture_output=True, text=True, check=True,
                          env={**os.environ, "TRAINPIPE_CACHE": str(cache), **env}).stdout


def _imports(python) -> str:
    return subprocess.run([str(python), "-c", "import _trainpipe_records as m; print(m.crc)"],
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler on this machine")
def test_built_once_then_taken_from_the_cache(bare_venv, tmp_path):
    first = _install(bare_venv, tmp_path / "cache")
    assert "built the native TFRecord reader" in first
    assert _imports(bare_venv) in ("sse4.2", "slice-by-8")
    assert "already installed" in _install(bare_venv, tmp_path / "cache")
    for module in (bare_venv.parents[1] / "lib").glob("python*/site-packages/_trainpipe_records*"):
        module.unlink()
    assert "using cached native TFRecord reader" in _install(bare_venv, tmp_path / "cache")
    assert _imports(bare_venv)


def test_a_failed_build_is_one_notice_and_the_python_reader(bare_venv, tmp_path):
    out = _install(bare_venv, tmp_path / "cache", CC="no-such-compiler")
    assert out.splitlines() == [
        "[install] notice: the native TFRecord reader did not build (no C compiler (no-such-compiler)); "
        "Pipe mode uses the Python reader"
    ]
    assert _imports(bare_venv) == ""
    assert not (tmp_path / "cache" / "native").exists() or not any((tmp_path / "cache" / "native").iterdir())
