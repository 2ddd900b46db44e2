"""`trainpipe run --sagemaker-local`: Docker is checked before anything is handed to the SDK."""

from __future__ import annotations

import os
import shutil

import pytest

from pipeline.cli.local import sagemaker_local
from pipeline.cli.main import main


def test_sagemaker_local_without_docker_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["run", "--sagemaker-local", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--sagemaker-local needs Docker, and `docker` is not on PATH" in err
    assert "use --local, which needs neither" in err


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("SAGEMAKER_LOCAL_TEST") != "1" or sagemaker_local.docker_problem() is not None,
                    reason="opt-in (SAGEMAKER_LOCAL_TEST=1): needs Docker, Compose, AWS credentials")
def test_sagemaker_local_runs_with_docker(capsys):  # pragma: no cover - no Docker here
    main(["run", "--sagemaker-local", "-p", "Epochs=1"])
    out = capsys.readouterr().out
    # The SDK's local mode refuses RegisterModel, so the execution cannot succeed; it must
    # get as far as running the steps it supports.
    assert "PreprocessData: Succeeded" in out
