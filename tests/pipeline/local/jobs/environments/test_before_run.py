"""A job that keeps this machine's Python instead of its image's is said before any step, in
one line (issue 47: a framework this machine cannot install at the image's version for the
image's Python keeps the runner's interpreter, "and one line says so at the start of the
run"); before, only the job's own log said it, once the job had started.

Fast: the CLI test's job imports TensorFlow only in a branch that never runs (the image check
reads imports, it does not run them), so the job takes a second.
"""

from __future__ import annotations

import sys

from pipeline.local.dag.image_check import JobCode
from pipeline.local.jobs.environments import before_run, interpreters
from tests import readme_record
from tests.pipeline.local.dag.test_image_check import TF_IMAGE, build_script_processor, run

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
SKLEARN_IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
RUNNER = f"{sys.version_info[0]}.{sys.version_info[1]}"
TF_JOB = """\
import sys

if len(sys.argv) > 99:  # never: what matters is that the code imports it
    import tensorflow
print("python %d.%d" % sys.version_info[:2])
"""


def test_a_job_keeping_the_runners_tensorflow_is_said_once_before_any_step(tmp_path):
    done = run(tmp_path, build_script_processor(tmp_path, TF_JOB))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = done.stdout + done.stderr
    line = (f"warning: step Idiom: runs this machine's Python {RUNNER} and its tensorflow 2.14.1, not the "
            f"image's Python 3.10 (record aws-tensorflow-training-2.14): a framework is not installed again "
            f"for the image's Python (TRAINPIPE_IMAGE_PYTHON maps the image to an interpreter that has it)")
    assert output.count(line) == 1, output[-3000:]
    readme_record.record(line)
    assert output.index(line) < output.index("==> [1/1] Idiom"), output[-3000:]
    (log,) = (tmp_path / "work").glob("runs/*/jobs/*/job.log")
    assert f"python {RUNNER}" in log.read_text()


def test_a_framework_at_another_version_names_both():
    image = f"{ECR}/pytorch-training:2.10.0-cpu-py313-ubuntu22.04-sagemaker"
    line = before_run.note(JobCode("Train", image, {"train.py": "import torch\n"}, ["train.py"]))
    from importlib.metadata import version

    assert line.startswith(f"runs this machine's Python {RUNNER} and its torch {version('torch')}, not the "
                           f"image's Python 3.13 and torch 2.10.0 (record aws-pytorch-training-2.10-cpu)"), line


def test_a_framework_of_another_version_under_the_same_python_is_said():
    image = f"{ECR}/pytorch-training:2.5.1-cpu-py311-ubuntu22.04-sagemaker"
    line = before_run.note(JobCode("Train", image, {"train.py": "import torch\n"}, ["train.py"]))
    from importlib.metadata import version

    assert line == (f"runs this machine's torch {version('torch')}, not the image's torch 2.5.1+cpu (record "
                    f"aws-pytorch-training-2.5-cpu): a framework is not installed again for the image's Python "
                    f"(TRAINPIPE_IMAGE_PYTHON maps the image to an interpreter that has it)"), line


def test_the_images_python_missing_names_each_version_that_differs(monkeypatch):
    job = JobCode("Evaluate", SKLEARN_IMAGE, {"evaluate.py": "import sklearn\n"}, ["evaluate.py"])
    monkeypatch.setattr(interpreters, "find_python", lambda version: None)
    monkeypatch.setattr(before_run, "find_python", lambda version: None)
    from importlib.metadata import version

    line = before_run.note(job)
    readme_record.record(line)
    assert line == (
        f"runs this machine's Python {RUNNER}, not the image's Python 3.9 (record aws-sklearn-1.2-1), which is "
        f"not on this machine: scikit-learn {version('scikit-learn')}, the image's 1.2.1 "
        f"(TRAINPIPE_IMAGE_PYTHON maps the image to one)")
    # Nothing it imports differs: its standard library still does (the line says which Python).
    plain = before_run.note(JobCode("Evaluate", SKLEARN_IMAGE, {"evaluate.py": "import json\n"}, ["evaluate.py"]))
    assert plain == (f"runs this machine's Python {RUNNER}, not the image's Python 3.9 (record aws-sklearn-1.2-1), "
                     f"which is not on this machine (TRAINPIPE_IMAGE_PYTHON maps the image to one)")


def test_a_job_on_its_images_python_or_its_versions_says_nothing():
    assert before_run.note(JobCode("P", TF_IMAGE, {"p.py": "import os\n"}, ["p.py"])) is None
    assert before_run.note(JobCode("P", "mine:latest", {"p.py": "import torch\n"}, ["p.py"])) is None
