"""``@step`` functions run locally (pipeline/local/jobs/function_step.py), through the CLI.

The pipeline is a user's script written as AWS's ``@step`` examples write it (SDK v2
``sagemaker.workflow.function_step``): preprocess -> train (taking preprocess's DelayedReturn)
-> a ConditionStep on train's returned value, on ``LocalStoreSession``. The script runs as
``python build.py`` so its functions are pickled by value, as a user's ``__main__`` is.
Each test starts the CLI once (two moto servers, two invoke_function runs: ~15 s)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle

from tests import readme_record

REPO = Path(__file__).resolve().parents[3]

BUILD = '''
import sys
import time
from pathlib import Path

from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.function_step import step
from sagemaker.workflow.pipeline import Pipeline

from pipeline.local.store.session import LocalStoreSession

ROLE = "arn:aws:iam::111122223333:role/SageMaker"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
workdir = Path(sys.argv[1])
session = LocalStoreSession(workdir=workdir, bucket="fs-bucket")
DEPENDENCIES = {dependencies!r}


@step(name="Preprocess", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE, dependencies=DEPENDENCIES)
def preprocess(rows):
    return {{"train": [r * 2 for r in rows], "count": len(rows)}}


@step(name="Train", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE)
def train(data, bias):
    import os
    return {{"score": sum(data["train"]) / data["count"] + bias, "job": os.environ["TRAINING_JOB_NAME"],
            "arn": os.environ["TRAINING_JOB_ARN"]}}


result = train(preprocess([1, 2, 3]), 0.5)
check = ConditionStep(name="GoodEnough", conditions=[ConditionGreaterThanOrEqualTo(left=result["score"], right=4.0)],
                      if_steps=[], else_steps=[FailStep(name="TooLow", error_message="score below 4")])
Path(sys.argv[2]).write_text(Pipeline(name="fsteps", steps=[check], sagemaker_session=session).definition())
'''


def build(tmp_path: Path, dependencies: str | None = None) -> Path:
    (tmp_path / "build.py").write_text(BUILD.format(dependencies=dependencies))
    return build_from(tmp_path)


def build_from(tmp_path: Path) -> Path:
    script, definition = tmp_path / "build.py", tmp_path / "fsteps.json"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "work"), str(definition)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return definition


def run_with(definition: Path, workdir: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir), "--tracking-uri", "off", "--quiet", *flags],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def run(definition: Path, workdir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir), "--tracking-uri", "off", "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})


def test_two_at_step_functions_run_and_the_second_returns_from_the_firsts_result(tmp_path):
    definition = build(tmp_path)
    done = run(definition, tmp_path / "work")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    execution = json.loads(record.read_text())
    steps = {s["name"]: s["status"] for s in execution["steps"]}
    # (2+4+6)/3 + 0.5 = 4.5 >= 4: the condition read the returned value and took the if branch.
    assert steps == {"Preprocess": "Succeeded", "Train": "Succeeded", "GoodEnough": "Succeeded",
                     "TooLow": "NotExecuted"}, steps
    results = tmp_path / "work" / "store" / "fs-bucket" / "fsteps" / execution["execution_id"] / "Train" / "results"
    returned = cloudpickle.loads((results / "payload.pkl").read_bytes())
    assert returned["score"] == 4.5
    # The job saw SageMaker's job variables: the step's job name and ARN (its role's account).
    assert returned["job"].startswith("fsteps-Train-")
    assert returned["arn"] == f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{returned['job']}"


def test_an_at_step_whose_requirement_is_not_installed_is_refused_before_any_step(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("trainpipe-no-such-distribution==1.0\n")
    definition = build(tmp_path, str(requirements))
    done = run(definition, tmp_path / "work")
    refusal = done.stderr.strip().splitlines()[-1]
    readme_record.record(refusal)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert refusal.startswith(
        "trainpipe run: error: the local runner cannot run step Preprocess (Type Training: an @step "
        "function needing trainpipe-no-such-distribution==1.0 (not installed), which a job cannot "
        "install offline; install it into the runner's environment); it runs these step types: "), refusal
    assert "Pass --stub-unsupported succeed" in refusal
    assert not (tmp_path / "work" / "runs").exists()


def test_stub_unsupported_skips_an_at_step_refused_for_a_missing_requirement(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("trainpipe-no-such-distribution==1.0\n")
    definition = build(tmp_path, str(requirements))
    done = run_with(definition, tmp_path / "work", "--stub-unsupported", "skip")
    # SageMaker would have run the skipped steps: the execution is Stopped (stubs.py), no job ran.
    assert done.returncode == 130, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    steps = {s["name"]: s for s in json.loads(record.read_text())["steps"]}
    assert steps["Preprocess"]["status"] == "NotExecuted"
    assert steps["Preprocess"]["detail"] == (
        "stubbed (--stub-unsupported skip): an @step function needing trainpipe-no-such-distribution==1.0 (not "
        "installed), which a job cannot install offline; install it into the runner's environment"), steps["Preprocess"]
    assert steps["Train"]["status"] == "NotExecuted"
    assert not list((tmp_path / "work" / "runs").glob("*/jobs/*"))


def test_an_at_step_that_raises_fails_its_step_naming_the_exception(tmp_path):
    # The same script with train's bias a string: float + str raises TypeError inside the job.
    (tmp_path / "build.py").write_text(BUILD.format(dependencies=None))
    script = (tmp_path / "build.py").read_text().replace("train(preprocess([1, 2, 3]), 0.5)",
                                                          "train(preprocess([1, 2, 3]), 'x')")
    (tmp_path / "build.py").write_text(script)
    definition = build_from(tmp_path)
    done = run(definition, tmp_path / "work")
    assert done.returncode != 0
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    steps = {s["name"]: s for s in json.loads(record.read_text())["steps"]}
    assert steps["Preprocess"]["status"] == "Succeeded"
    assert steps["Train"]["status"] == "Failed"
    assert steps["Train"]["failure_reason"].startswith("AlgorithmError: ")
    # As SageMaker's: the failure file the SDK writes, repr() of the function's exception.
    assert steps["Train"]["failure_reason"] == ("AlgorithmError: TypeError(\"unsupported operand type(s) for +: "
                                                "'float' and 'str'\")"), steps["Train"]["failure_reason"]
    assert steps.get("GoodEnough", {}).get("status") != "Succeeded"
    # The exception the SDK serialized (what a client's ``RemoteFunctionError`` reads) reached the store.
    execution = json.loads(record.read_text())["execution_id"]
    assert list((tmp_path / "work" / "store" / "fs-bucket" / "fsteps" / execution / "Train").rglob("exception/*"))


def test_a_delayed_return_of_a_cached_step_is_read_from_the_execution_that_made_it(tmp_path):
    # The v2 @step decorator takes no cache_config; a definition edited to cache Preprocess (as
    # SageMaker would honour) answers it from the first execution, whose results Train then reads.
    definition = build(tmp_path)
    document = json.loads(definition.read_text())
    (preprocess,) = [s for s in document["Steps"] if s["Name"] == "Preprocess"]
    preprocess["CacheConfig"] = {"Enabled": True, "ExpireAfter": "P1D"}
    definition.write_text(json.dumps(document))
    for _ in range(2):
        done = run(definition, tmp_path / "work")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first, second = sorted((tmp_path / "work" / "runs").glob("*/execution.json"))
    steps = {s["name"]: s for s in json.loads(second.read_text())["steps"]}
    assert steps["Preprocess"]["cache_hit"]["execution_id"] == json.loads(first.read_text())["execution_id"]
    assert steps["Train"]["status"] == "Succeeded" and steps["GoodEnough"]["status"] == "Succeeded"


def test_stopping_the_run_ends_a_running_at_step_function(tmp_path):
    (tmp_path / "build.py").write_text(BUILD.format(dependencies=None).replace(
        "def preprocess(rows):\n", "def preprocess(rows):\n    import time\n    time.sleep(300)\n"))
    definition = build_from(tmp_path)
    runner = subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                               "--workdir", str(tmp_path / "work"), "--tracking-uri", "off", "--quiet"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not any("Invoking the function" in log.read_text()
                  for log in (tmp_path / "work" / "runs").glob("*/jobs/*/job.log")):
        assert time.monotonic() < deadline and runner.poll() is None, runner.stdout.read()[-3000:]
        time.sleep(0.5)
    runner.send_signal(signal.SIGINT)
    output = runner.communicate(timeout=60)[0]
    assert runner.returncode == 130, output[-3000:]
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    assert {s["name"]: s["status"] for s in json.loads(record.read_text())["steps"]}["Preprocess"] == "Stopped"
    # No process of the job outlives the run (its failure-file argument names the job's folder).
    left = [p for p in Path("/proc").glob("[0-9]*/cmdline") if str(tmp_path).encode() in _read(p)]
    assert not left, [_read(p) for p in left]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # ended while listed
        return b""


# A user's project folder, as AWS's @step examples lay it out: the pipeline script beside a module
# of the user's own, shipped with IncludeLocalWorkDir (the SDK's config: v2's @step takes no
# include_local_workdir argument; LocalStoreSession reads no config file, so the script sets the
# session's). The SDK zips the working folder's .py files into
# workspace.zip, in the channel named after the pipeline's build time.
PROJECT_BUILD = '''
import os
import sys
from pathlib import Path

from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.function_step import step
from sagemaker.workflow.pipeline import Pipeline

from pipeline.local.store.session import LocalStoreSession
from scoring import score

ROLE = "arn:aws:iam::111122223333:role/SageMaker"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
session = LocalStoreSession(workdir=Path(sys.argv[1]), bucket="fs-bucket")
session.sagemaker_config = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {
    "TelemetryOptOut": True, "RemoteFunction": {"IncludeLocalWorkDir": True}}}}}


@step(name="Score", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE)
def evaluate(rows):
    return score(rows)


result = evaluate([1, 2, 3])
check = ConditionStep(name="GoodEnough", conditions=[ConditionGreaterThanOrEqualTo(left=result, right=4.0)],
                      if_steps=[], else_steps=[FailStep(name="TooLow", error_message="score below 4")])
Path(sys.argv[2]).write_text(Pipeline(name="fsteps", steps=[check], sagemaker_session=session).definition())
'''

# scoring.py exists only in the project folder: the job imports it from the unpacked workspace.
SCORING = "def score(rows):\n    return sum(rows) / len(rows) * 2 + 0.5\n"

# A function reading what the job's container holds: the dependencies file (the bootstrap copies
# the pre_exec_script_and_dependencies channel into the workspace, the job's working folder),
# /opt/ml/input/config/resourceconfig.json, and SageMaker's variables.
CONTAINER_BUILD = '''
import sys
from pathlib import Path

from sagemaker.workflow.function_step import step
from sagemaker.workflow.pipeline import Pipeline

from pipeline.local.store.session import LocalStoreSession

ROLE = "arn:aws:iam::111122223333:role/SageMaker"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
session = LocalStoreSession(workdir=Path(sys.argv[1]), bucket="fs-bucket")


@step(name="Look", role=ROLE, instance_type="ml.m5.xlarge", image_uri=IMAGE, dependencies="requirements.txt")
def look():
    import json
    import os
    return {"requirements": Path("requirements.txt").read_text(), "cwd": os.getcwd(),
            "resources": json.loads(Path("/opt/ml/input/config/resourceconfig.json").read_text()),
            "job": os.environ["TRAINING_JOB_NAME"], "host": os.environ.get("SM_CURRENT_HOST")}


Path(sys.argv[2]).write_text(Pipeline(name="fsteps", steps=[look()], sagemaker_session=session).definition())
'''


def build_project(tmp_path: Path, script: str, files: dict[str, str]) -> Path:
    """``python build.py`` run in the user's project folder (the SDK's working folder)."""
    project = tmp_path / "project"
    project.mkdir()
    for name, text in {"build.py": script, **files}.items():
        (project / name).write_text(text)
    definition = tmp_path / "fsteps.json"
    done = subprocess.run([sys.executable, "build.py", str(tmp_path / "work"), str(definition)],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return definition


def returned(tmp_path: Path, step: str):
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    execution = json.loads(record.read_text())
    results = tmp_path / "work" / "store" / "fs-bucket" / "fsteps" / execution["execution_id"] / step / "results"
    return cloudpickle.loads((results / "payload.pkl").read_bytes())


def test_an_at_step_imports_a_module_of_the_users_working_folder_and_its_value_drives_the_condition(tmp_path):
    definition = build_project(tmp_path, PROJECT_BUILD, {"scoring.py": SCORING})
    done = run(definition, tmp_path / "work")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    steps = {s["name"]: s["status"] for s in json.loads(record.read_text())["steps"]}
    # (1+2+3)/3*2 + 0.5 = 4.5 >= 4: scoring.py came from the workspace; the condition took the if branch.
    assert steps == {"Score": "Succeeded", "GoodEnough": "Succeeded", "TooLow": "NotExecuted"}, steps
    assert returned(tmp_path, "Score") == 4.5


def test_an_at_step_reads_its_dependencies_file_and_the_containers_config_and_variables(tmp_path):
    definition = build_project(tmp_path, CONTAINER_BUILD, {"requirements.txt": "# shipped with the job\n"})
    done = run(definition, tmp_path / "work")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    value = returned(tmp_path, "Look")
    # SageMaker: the dependencies channel's file, copied into the workspace job_driver.sh cds into
    # (the SDK appended its own requirement line to the user's file).
    assert value["requirements"].startswith("# shipped with the job\n"), value
    assert "sagemaker>=2.256.0,<3.0.0" in value["requirements"]
    assert Path(value["cwd"]).name == "sagemaker_remote_function_workspace"
    assert value["resources"]["current_host"] == "algo-1" and value["resources"]["hosts"] == ["algo-1"]
    assert value["resources"]["current_instance_type"] == "ml.m5.xlarge"
    assert value["job"].startswith("fsteps-Look-")
    assert value["host"] == "algo-1"  # from /opt/ml/input/sm_training.env, which job_driver.sh sources
    # SageMaker uploads the job's (empty) model.tar.gz beside the results too.
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    (step,) = json.loads(record.read_text())["steps"]
    assert step["properties"]["ModelArtifacts"]["S3ModelArtifacts"].endswith(f"/results/{value['job']}/output/model.tar.gz")
    assert step["properties"]["FunctionResults"].endswith("/Look/results")


def test_without_a_private_opt_ml_an_at_step_runs_invoke_function_directly_and_its_log_says_so(tmp_path):
    definition = build(tmp_path)
    done = run(definition, tmp_path / "work", {"TRAINPIPE_NAMESPACES": "0"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert returned(tmp_path, "Train")["score"] == 4.5
    (log,) = (tmp_path / "work" / "runs").glob("*/jobs/fsteps-Train-*/job.log")
    first = log.read_text().splitlines()[0]
    readme_record.record(first)
    assert "no private /opt/ml here" in first and "without job_driver.sh" in first, first
