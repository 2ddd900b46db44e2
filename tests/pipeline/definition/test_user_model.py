"""The user's model file is checked in a subprocess with a job's scrubbed environment."""

from __future__ import annotations

import subprocess

from pipeline.definition import user_model


def test_the_model_check_gets_no_credential_and_a_home_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fake")
    monkeypatch.setenv("HOME", str(tmp_path / "runner-home"))
    monkeypatch.setenv("TF_CONFIG", "{}")
    seen = {}

    def run(command, **kwargs):
        seen.update(kwargs["env"])
        return subprocess.CompletedProcess(command, 0, "built", "")

    monkeypatch.setattr(user_model.subprocess, "run", run)
    model = tmp_path / "model.py"
    model.write_text("")
    assert user_model.check_user_model(str(model), "table", {}) == "built"
    assert not {"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "TF_CONFIG"} & set(seen)
    assert seen["HOME"] != str(tmp_path / "runner-home")
    assert seen["PYTHONPATH"] == str(user_model.REPO_ROOT)
