"""A job's requirements file names files of its code only (``pipeline/local/jobs/requirement_paths.py``):
the runner's pip, on this machine's filesystem, would otherwise read a file of this machine
(``-r ~/.aws/credentials``) and echo its lines into the job's log. Through ``run --local`` and
on the checker itself. And what the requirements install runs at the job's Python's start never
sees the runner's environment when the runner probes that Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.jobs.requirement_paths import OutsideCode, check
from pipeline.local.store.storage import LocalStorage
from tests import readme_record
from tests.pipeline.local.helpers import put_code, training_request

REPO = Path(__file__).resolve().parents[4]
SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
CODE_URI = "s3://bucket/code/train/sourcedir.tar.gz"


@pytest.fixture
def code(tmp_path):
    folder = tmp_path / "code"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "more.txt").write_text("numpy\n")
    (folder / "pkg").mkdir()
    return folder


@pytest.mark.parametrize("text", [
    "numpy==1.26.4\ntensorflow>=2.14 ; python_version >= '3.9'  # a comment\n",
    "-r sub/more.txt\n--requirement=sub/more.txt\n-c sub/more.txt\n",
    "-e ./pkg\n./pkg\nmypkg @ https://example.com/mypkg-1.0.tar.gz\ngit+https://github.com/o/r.git#egg=r\n",
    "--index-url https://pypi.org/simple\n--extra-index-url=https://example.com/simple\n--pre\n",
    "--extra-index-url ${PRIVATE_INDEX_URL}\nnumpy==1.26.4 --hash=sha256:0123abcd\n",
    # Packages pip installs from a path: it reads no text of them into the log (and a wheel path
    # out of the code is how a test installs a wheel it built).
    "-e /home/me/project\nmypkg @ file:///opt/wheels/mypkg-1.0.tar.gz\n../wheels/w-1.0-py3-none-any.whl\n"
    "--find-links /root/wheels\n-i file:///srv/index\n-r https://example.com/requirements.txt\n",
])
def test_names_inside_the_code_and_network_urls_pass(code, text):
    (code / "requirements.txt").write_text(text)
    check(code / "requirements.txt", code)


@pytest.mark.parametrize("text", [
    "-r /home/me/.aws/credentials\n",
    "-r../../secret\n",
    "--requirement=~/.netrc\n",
    "numpy\n-c ${HOME}/.aws/credentials\n",
    "-r file:///etc/passwd\n",
    "--constraint=../../constraints.txt\n",
    "--pre \\\n  -r /etc/shadow\n",
])
def test_a_path_out_of_the_code_is_refused_in_one_line(code, text):
    (code / "requirements.txt").write_text(text)
    with pytest.raises(OutsideCode, match=r"^requirements.txt, line \d: .*outside the job's code"):
        check(code / "requirements.txt", code)


def test_links_out_of_the_code_are_refused_wherever_they_are_named(code, tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text(SECRET + "\n")
    (code / "sub" / "link.txt").symlink_to(secret)
    (code / "requirements.txt").write_text("-r sub/nested.txt\n")
    (code / "sub" / "nested.txt").write_text("-r link.txt\n")
    with pytest.raises(OutsideCode, match=r"^sub/nested.txt, line 1: 'link.txt' is a link out of the job's code$"):
        check(code / "requirements.txt", code)
    (code / "requirements.txt").unlink()
    (code / "requirements.txt").symlink_to(secret)
    with pytest.raises(OutsideCode, match="^requirements file requirements.txt is a link out of the job's code$"):
        check(code / "requirements.txt", code)


def test_run_local_refuses_a_requirements_file_naming_a_credentials_file_and_pip_never_reads_it(tmp_path):
    """The old code ran pip install -r on it, and pip's log held the credential line (pip
    echoes the first line it cannot parse: a token file's, or this one's)."""
    secret = tmp_path / "credentials"
    secret.write_text(f"{SECRET}\n")
    workdir = tmp_path / "work"
    put_code(LocalStorage(workdir / "store"), CODE_URI,
             {"train.py": "print('trained')\n", "requirements.txt": f"-r {secret}\n"})
    definition = tmp_path / "pipeline.json"
    definition.write_text(json.dumps({"Version": "2020-12-01", "Parameters": [], "Steps": [
        {"Name": "Train", "Type": "Training", "Arguments": training_request(CODE_URI, program="train.py")}]}))
    env = {**os.environ, "TRAINPIPE_TRACKING": "off"}
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    last = output.strip().splitlines()[-1]
    readme_record.record(last)
    assert last.endswith(f"requirements.txt, line 1: -r '{secret}' names a path outside the job's code; name "
                         f"files of the code by relative paths without '..', '~' or '$' (pip runs on this "
                         f"machine, where that file may exist though the job's container has no such file: pip "
                         f"would read it and echo its lines into the job's log)"), last
    written = [p for p in workdir.rglob("*") if p.is_file() and not p.is_symlink()]
    assert "wJalrXUtnFEMI" not in output
    assert not [p for p in written if b"wJalrXUtnFEMI" in p.read_bytes()]


def test_an_sdk_v3_jobs_requirements_are_checked_the_same_way(code, tmp_path):
    """v3's SourceCode(requirements=...) file is read by the same check before pip sees it."""
    from types import SimpleNamespace

    from pipeline.local.jobs.failures import CLIENT_ERROR, JobFailure
    from pipeline.local.jobs.v3.training_v3 import TrainingJobV3

    (code / "reqs.txt").write_text(f"-c {tmp_path / 'credentials'}\n")
    job = object.__new__(TrainingJobV3)
    job.v3, job.hosts = SimpleNamespace(requirements="reqs.txt"), ["algo-1"]
    job.code_dir = lambda host: code
    with pytest.raises(JobFailure) as refused:
        job.requirements()
    assert refused.value.failure_type == CLIENT_ERROR
    assert str(refused.value).startswith(f"reqs.txt, line 1: -c '{tmp_path / 'credentials'}' names a path outside")


def test_the_probes_of_a_jobs_python_never_get_the_runners_environment(tmp_path, monkeypatch):
    """The job's Python runs what its installed requirements put at its start (a .pth file):
    the runner's probes of it (mpi4py, torch) start it with what every job gets. The old code
    passed the runner's whole environment, its secrets included."""
    from pipeline.local.jobs.launchers import torch_importable
    from pipeline.local.jobs.v3.training_v3 import mpi4py_importable

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "runner-secret-55e1")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "runner-token-55e1")
    seen = tmp_path / "environ"
    python = tmp_path / "python"  # a job's Python whose start writes out what it was given
    python.write_text(f"#!/bin/sh\nenv >> {seen}\nexit 0\n")
    python.chmod(0o755)
    assert mpi4py_importable(str(python)) and torch_importable(str(python))
    assert seen.read_text().count("PATH=") >= 2 and "55e1" not in seen.read_text()
