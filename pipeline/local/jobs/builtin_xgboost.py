"""SageMaker's built-in XGBoost algorithm (the sagemaker-xgboost image in algorithm mode: no
``sagemaker_program``, no ContainerEntrypoint), run locally.

The container's algorithm mode is ``builtin_xgboost_train.py`` (the job side, read from
aws/sagemaker-xgboost-container); this job stages the channels as any training job does,
puts that program where the image would hold it (the host's ``code`` folder) and runs it
under the job's Python. That Python is the image's, seeded with the xgboost (and numpy) the
image's record pins (``environments/environment.py`` ``seeded``: made once per machine under
``~/.cache/trainpipe/image-environments/``), because the program imports them and this
runner holds no xgboost. A job whose Python has another xgboost (or none) is refused before
the program starts, in one line naming what to do.

What SageMaker's algorithm does that this one does not is refused before any step
(``dag/training_kinds.py`` ``xgboost_refusal``): Pipe input, a ContentType other than CSV or
libsvm, more than one instance.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from pipeline.environment import scrubbed
from pipeline.images import catalog
from pipeline.local.jobs import contract
from pipeline.local.jobs.builtin_xgboost_train import METRICS
from pipeline.local.jobs.environments import environment as job_environment
from pipeline.local.jobs.environments.environment import IMAGE_PYTHON_ENV
from pipeline.local.jobs.failures import ALGORITHM_ERROR, CLIENT_ERROR, JobFailure
from pipeline.local.jobs.logs import Metrics
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.store import channels as ch

PROGRAM = Path(__file__).with_name("builtin_xgboost_train.py")
# The program's name in the job's code folder: where the image holds the algorithm.
PROGRAM_NAME = "sagemaker_xgboost_algorithm.py"
CHECKPOINT_CONFIG = "checkpointconfig.json"  # SageMaker: /opt/ml/input/config/checkpointconfig.json


def algorithm_metrics() -> list[dict]:
    """SageMaker: algorithm_mode/metrics.py: validation:<metric> read from the evaluation lines (the
    job's own MetricDefinitions, AWS's examples add train:rmse, come first)."""
    return [{"Name": f"validation:{m}", "Regex": f".*\\[[0-9]+\\].*#011validation-{re.escape(m)}:(\\S+)"}
            for m in METRICS]


def xgboost_version(image_uri: str) -> str | None:
    """The xgboost the image's record pins (``==1.7.4`` -> ``1.7.4``), None without a record."""
    record = catalog.find(image_uri)
    pin = str((record.packages if record is not None else {}).get("xgboost") or "")
    found = re.fullmatch(r"==\s*([0-9][0-9A-Za-z.+!-]*)", pin.strip())
    return found.group(1) if found else None


class BuiltinXGBoostJob(TrainingJob):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        own = (self.request.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []
        names = {d.get("Name") for d in own}
        self.metrics = Metrics([*own, *(d for d in algorithm_metrics() if d["Name"] not in names)])
        self.xgboost = xgboost_version(self.image_uri)

    def check_launch(self) -> None:
        """What ``dag/training_kinds.py`` ``xgboost_refusal`` refuses before any step, checked
        again for a job started another way (jobs and dag stand side by side: not imported)."""
        where = f"image {self.image_uri} (SageMaker's built-in XGBoost algorithm)"
        if self.xgboost is None:
            raise JobFailure(f"{where}: no record in pipeline/images/records/ names its xgboost version; "
                             f"use an image version listed there", CLIENT_ERROR)
        piped = [c.name for c in self.channels if c.input_mode == ch.PIPE]
        if piped:
            raise JobFailure(f"{where}: channel {piped[0]} in Pipe mode, which the local XGBoost does not read; "
                             f"use File input", CLIENT_ERROR)
        if len(self.hosts) > 1:
            raise JobFailure(f"{where}: {len(self.hosts)} instances (distributed XGBoost), which the local "
                             f"XGBoost does not run; use instance_count=1", CLIENT_ERROR)

    def unpack_code(self, base: Path) -> None:
        code = base / "code"
        code.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROGRAM, code / PROGRAM_NAME)
        if self.checkpoint_uri:
            # SageMaker: the platform writes the CheckpointConfig where the container reads it.
            config = base / "input" / "config" / CHECKPOINT_CONFIG
            local = contract.relocate(self.checkpoint_local, self.container_base(base.name))
            config.write_text(json.dumps({"LocalPath": str(local), "S3Uri": self.checkpoint_uri}))

    def requirements(self) -> bytes | None:
        return None  # the image's own xgboost, from its record (seeded), not a requirements.txt

    def ready(self) -> None:
        """The job's Python: the image's (where this machine has it), as every job's
        (``interpreters.choose``), seeded with the image's pinned xgboost and numpy; then the
        check that its xgboost is the image's."""
        code = job_environment.facts(self.image_uri, None, self.code_paths())
        guard = job_environment.guard_for(self.image_uri, code)
        self.python_env = job_environment.prepare(self.environments, self.image_uri, None, job_dir=self.job_dir,
                                                  guard=guard, code=code)
        interpreter = self.python_env.interpreter
        self.note(f"python: {self.python_env.python} (Python {interpreter.version}"
                  + (f": {interpreter.why}" if interpreter.why else "") + ")")
        # SageMaker: the algorithm runs the image's xgboost; another one trains another model.
        # The job's Python runs what its environment's .pth files say: given what a job gets.
        probe = subprocess.run([self.python, "-c", "import xgboost; print(xgboost.__version__)"],
                               capture_output=True, text=True, timeout=300, env=scrubbed(os.environ))
        have = probe.stdout.strip() if probe.returncode == 0 else None
        if have != self.xgboost:
            record = catalog.find(self.image_uri)
            wanted = record.python if record is not None else "?"
            interpreter = self.python_env.interpreter if self.python_env is not None else None
            why = f": {interpreter.why}" if interpreter is not None and interpreter.why else ""
            raise JobFailure(
                f"image {self.image_uri} is SageMaker's built-in XGBoost algorithm with xgboost {self.xgboost} on "
                f"Python {wanted}, but the job's Python {interpreter.version if interpreter else '?'} has "
                f"{'xgboost ' + have if have else 'no xgboost'}{why}; install Python {wanted} (pyenv install "
                f"{wanted}) so trainpipe installs xgboost {self.xgboost} for it once, or map the image to a Python "
                f"that has it ({IMAGE_PYTHON_ENV}='{self.python_env.image_regex if self.python_env else '...'}="
                f"/path/to/python{wanted}')", CLIENT_ERROR)
        self.note(f"built-in XGBoost algorithm: xgboost {have} (the image's) in {self.python}")

    def outcome(self) -> None:
        """SageMaker: a built-in algorithm's FailureReason is its own ``ClientError: ...`` or
        ``AlgorithmError: ...`` (the failure file the program wrote), not a script's exit."""
        self.watch.poll()
        if self.first_failed is not None and self.watch.first is not None:
            text = self.watch.first[1].strip()
            if text.startswith(("ClientError: ", "AlgorithmError: ")):
                raise JobFailure(text, CLIENT_ERROR if text.startswith("ClientError") else ALGORITHM_ERROR)
        super().outcome()

    def host_environment(self, host: str) -> dict:
        env = super().host_environment(host)
        config = self.container_base(host) / "input" / "config"
        # SageMaker: what the container's training.py run_algorithm_mode reads (its toolkit sets them).
        env.update({"SM_INPUT_TRAINING_CONFIG_FILE": str(config / "hyperparameters.json"),
                    "SM_INPUT_DATA_CONFIG_FILE": str(config / "inputdataconfig.json"),
                    "SM_CHECKPOINT_CONFIG_FILE": str(config / CHECKPOINT_CONFIG)})
        return env

    def command(self, host: str) -> list[str]:
        return [self.python, str(self.code_cwd(host) / PROGRAM_NAME)]
