"""An @step function run directly under the runner's Python (no namespaces here: ``DirectInvokeJob``)
gets what every job gets, never the runner's secrets, and neither does the moto S3 server started
for it, whose environment such a job can read (no PID namespace). Through the CLI; the old code
passed the runner's whole environment, AWS_* aside, to both."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.pipeline.local.test_function_steps import REPO, build_from, returned

SECRETS = {"MLFLOW_TRACKING_TOKEN": "mlflow-token-7d1e", "GITHUB_TOKEN": "ghp-runner-4b2a",
           "AWS_SECRET_ACCESS_KEY": "aws-secret-9f0c"}

BUILD = '''
import sys
from pathlib import Path

from sagemaker.workflow.function_step import step
from sagemaker.workflow.pipeline import Pipeline

from pipeline.local.store.session import LocalStoreSession

session = LocalStoreSession(workdir=Path(sys.argv[1]), bucket="fs-bucket")


@step(name="Snoop", role="arn:aws:iam::111122223333:role/SageMaker", instance_type="ml.m5.xlarge",
      image_uri="683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3")
def snoop(needles):
    import glob, os
    own = sorted(k for k, v in os.environ.items() if any(n in v for n in needles))
    moto = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if b"moto.server" in open(path, "rb").read():
                text = open(path[:-len("cmdline")] + "environ", "rb").read().decode("latin-1")
                moto.append(sorted(n for n in needles if n in text))
        except OSError:
            pass
    return {"own": own, "moto": moto}


Path(sys.argv[2]).write_text(Pipeline(name="fsteps", steps=[snoop(NEEDLES)], sagemaker_session=session).definition())
'''


def test_an_at_step_run_directly_and_its_s3_server_hold_none_of_the_runners_secrets(tmp_path):
    (tmp_path / "build.py").write_text(BUILD.replace("NEEDLES", repr(sorted(SECRETS.values()))))
    definition = build_from(tmp_path)
    env = {**os.environ, **SECRETS, "TRAINPIPE_NAMESPACES": "0"}
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(tmp_path / "work"), "--tracking-uri", "off", "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = returned(tmp_path, "Snoop")
    assert seen == {"own": [], "moto": [[]]}, seen  # the old code: own 2, moto all 3
