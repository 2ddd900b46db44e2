"""One workdir wherever a command starts: --workdir, then TRAINPIPE_WORKDIR, then the project
root's .trainpipe, then ./.trainpipe; and a run says which one it used."""

from __future__ import annotations

import json

import pytest

from pipeline.cli.main import main
from pipeline.errors import UserError
from pipeline.workdir import DIRNAME, ENV_VAR, resolve_workdir

# A definition that runs in an instant: one Fail step, no job.
FAIL_ONLY = {"Version": "2020-12-01", "Parameters": [],
             "Steps": [{"Name": "Stop", "Type": "Fail", "Arguments": {"ErrorMessage": "stop here"}}]}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project (pyproject.toml at its root) with a subfolder, the caller's env scrubbed."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    root = tmp_path / "project"
    (root / "notebooks" / "deeper").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    return root


def test_from_a_subfolder_the_project_roots_workdir(project):
    chosen = resolve_workdir(cwd=project / "notebooks" / "deeper", environ={})
    assert chosen.path == project / DIRNAME
    assert chosen.line() == f"workdir: {project / DIRNAME} (from the project root, where pyproject.toml is)"
    assert resolve_workdir(cwd=project, environ={}).path == project / DIRNAME


def test_the_env_var_beats_the_project_root_and_the_flag_beats_both(project, tmp_path):
    sub = project / "notebooks"
    env = {ENV_VAR: str(tmp_path / "from-env")}
    assert resolve_workdir(cwd=sub, environ=env).path == tmp_path / "from-env"
    assert resolve_workdir(cwd=sub, environ=env).source == ENV_VAR
    flagged = resolve_workdir("mine", cwd=sub, environ=env)
    assert (flagged.path, flagged.source) == (sub / "mine", "--workdir")  # relative: from the cwd
    assert resolve_workdir(cwd=sub, environ={ENV_VAR: "  "}).path == project / DIRNAME  # blank = unset


def test_outside_a_project_an_existing_workdir_above_else_the_current_folder(tmp_path):
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    assert resolve_workdir(cwd=here, environ={}).path == here / DIRNAME
    assert resolve_workdir(cwd=here, environ={}).source == "the current directory"
    (tmp_path / "a" / DIRNAME).mkdir()
    assert resolve_workdir(cwd=here, environ={}).path == tmp_path / "a" / DIRNAME


def test_a_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "wd").write_text("not a folder")
    with pytest.raises(UserError, match=rf"workdir {tmp_path / 'wd'} \(from {ENV_VAR}\) is a file"):
        resolve_workdir(cwd=tmp_path, environ={ENV_VAR: "wd"})


def _run_fail_only(project, capsys, *flags):
    definition = project / "definition.json"
    definition.write_text(json.dumps(FAIL_ONLY))
    assert main(["run", "--local", "--quiet", "--definition", str(definition), *flags]) == 1
    return capsys.readouterr()


def test_run_from_a_subfolder_keeps_its_run_in_the_roots_workdir_and_says_so(project, monkeypatch, capsys):
    monkeypatch.chdir(project / "notebooks")
    captured = _run_fail_only(project, capsys)
    assert captured.err.splitlines()[0] == (f"workdir: {project / DIRNAME} "
                                           "(from the project root, where pyproject.toml is)")
    [run] = list((project / DIRNAME / "runs").iterdir())
    assert not (project / "notebooks" / DIRNAME).exists()
    # The other commands find it from anywhere in the project.
    monkeypatch.chdir(project / "notebooks" / "deeper")
    assert main(["executions", "--local"]) == 0
    assert run.name in capsys.readouterr().out
    monkeypatch.chdir(project)
    assert main(["store", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(project / DIRNAME / "store")


def test_the_env_var_then_the_flag_win_for_a_command(project, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(project / "notebooks")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env-wd"))
    assert _run_fail_only(project, capsys).err.splitlines()[0] == (
        f"workdir: {tmp_path / 'env-wd'} (from {ENV_VAR})")
    assert (tmp_path / "env-wd" / "runs").is_dir()
    captured = _run_fail_only(project, capsys, "--workdir", str(tmp_path / "flag-wd"))
    assert captured.err.splitlines()[0] == f"workdir: {tmp_path / 'flag-wd'} (from --workdir)"
    assert main(["store", "path", "--workdir", "rel"]) == 0
    assert capsys.readouterr().out.strip() == str(project / "notebooks" / "rel" / "store")
    assert not (project / DIRNAME).exists()
