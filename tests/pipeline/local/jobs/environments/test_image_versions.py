"""A job that installs nothing still runs its image's Python and versions of what it imports (issue 47):
AWS's SKLearn 1.2-1 image holds scikit-learn 1.2.1 under Python 3.9, so a ScriptProcessor
calling ``sklearn.metrics.root_mean_squared_error`` (new in scikit-learn 1.4) fails here as it
fails there, though this machine's scikit-learn has it. Through ``trainpipe run --local
--definition`` on a pipeline built with SDK v2.

Slow: the first run on a machine makes the image's environment (the image's Python with
scikit-learn 1.2.1, numpy 1.24.1, scipy 1.8.0 from the package index, ~/.cache/trainpipe/
image-environments/, shared by later runs and tests); later runs reuse it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.jobs.environments.environment import find_python

REPO = Path(__file__).resolve().parents[5]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
SKLEARN_IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
NEW_API = """\
import sklearn
from sklearn.metrics import root_mean_squared_error

print(root_mean_squared_error([1.0], [2.0]))
"""
OLD_API = """\
import json
import os
import sys

import sklearn
from sklearn.metrics import mean_squared_error

os.makedirs("/opt/ml/processing/report", exist_ok=True)
with open("/opt/ml/processing/report/versions.json", "w") as f:
    json.dump({"sklearn": sklearn.__version__, "python": "%d.%d" % sys.version_info[:2],
               "mse": mean_squared_error([1.0], [2.0])}, f)
"""


def build(tmp_path: Path, script: str) -> Path:
    from sagemaker.processing import ProcessingOutput, ScriptProcessor
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import ProcessingStep

    from pipeline.local.store.session import LocalStoreSession

    (tmp_path / "evaluate.py").write_text(script)
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="versions-bucket")
    processor = ScriptProcessor(image_uri=SKLEARN_IMAGE, command=["python3"], role=ROLE,
                                instance_type="ml.m5.xlarge", instance_count=1, base_job_name="evaluate",
                                sagemaker_session=session)
    step = ProcessingStep(name="Evaluate", step_args=processor.run(
        code=str(tmp_path / "evaluate.py"),
        outputs=[ProcessingOutput(output_name="report", source="/opt/ml/processing/report")]))
    definition = tmp_path / "pipeline.json"
    definition.write_text(Pipeline(name="versions", steps=[step], sagemaker_session=session).definition())
    return definition


def run(tmp_path: Path, definition: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(tmp_path / "work")],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)


def newer_fails_older_reports(tmp_path: Path, newer_script: str, failure: str, older_script: str, report: dict) -> None:
    """The script using what the image lacks fails in the job, on the image's Python; the one
    that does not writes ``report`` (versions.json)."""
    newer = tmp_path / "newer"
    newer.mkdir()
    done = run(newer, build(newer, newer_script))
    assert done.returncode != 0, done.stdout[-3000:]
    (log,) = (newer / "work").glob("runs/*/jobs/*/job.log")
    text = log.read_text()
    assert failure in text, text[-3000:]
    assert "(Python 3.9: the image's Python, with its aws-sklearn-1.2-1 packages the code imports" in text

    older = tmp_path / "older"
    older.mkdir()
    done = run(older, build(older, older_script))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (written,) = (older / "work").glob("store/**/versions.json")
    assert json.loads(written.read_text()) == report


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_a_job_that_installs_nothing_runs_the_images_scikit_learn(tmp_path):
    from sklearn.metrics import root_mean_squared_error  # noqa: F401  (this machine has the API)

    newer_fails_older_reports(tmp_path, NEW_API, "ImportError: cannot import name 'root_mean_squared_error' from "
                              "'sklearn.metrics'", OLD_API, {"sklearn": "1.2.1", "python": "3.9", "mse": 1.0})


# Installs nothing and imports nothing of its image: its Python is still the image's 3.9, whose
# standard library has no datetime.UTC (3.11's); the pre-run check reads module names, not names
# inside them, so only the image's Python finds it.
NEW_STDLIB = """\
from datetime import UTC

print(UTC)
"""
OLD_STDLIB = """\
import json
import os
import sys
from datetime import timezone

os.makedirs("/opt/ml/processing/report", exist_ok=True)
with open("/opt/ml/processing/report/versions.json", "w") as f:
    json.dump({"python": "%d.%d" % sys.version_info[:2], "utc": str(timezone.utc)}, f)
"""


@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_a_job_importing_only_the_standard_library_runs_the_images_python(tmp_path):
    from datetime import UTC  # noqa: F401  (this machine's Python has it)

    newer_fails_older_reports(tmp_path, NEW_STDLIB, "ImportError: cannot import name 'UTC' from 'datetime'",
                              OLD_STDLIB, {"python": "3.9", "utc": "UTC"})
