"""`trainpipe run --local`'s step options through the CLI's process (run_options.py): a Lambda
step of an SDK-built definition given a value with --stub, --stub-unsupported skip ending the
execution Stopped, the pipeline-name line, and the options' one-line refusals.

No job runs: each case is the CLI starting and reading the definition (a few seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import readme_record

REPO = Path(__file__).resolve().parents[4]
# The SDK warns that a Lambda given by its ARN alone is not updated: nothing here deploys one.
pytestmark = pytest.mark.filterwarnings("ignore:Lambda function won't be updated:UserWarning")


def lambda_pipeline() -> str:
    """A Lambda step whose output a condition reads: "ok" takes the if branch (nothing), anything
    else the Fail step, as AWS's Lambda-step examples gate a pipeline on a function's answer."""
    from sagemaker.lambda_helper import Lambda
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionEquals
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
    from sagemaker.workflow.pipeline import Pipeline

    status = LambdaOutput(output_name="status", output_type=LambdaOutputTypeEnum.String)
    check = LambdaStep(name="CheckData", inputs={"table": "raw"}, outputs=[status],
                       lambda_func=Lambda(function_arn="arn:aws:lambda:us-east-1:111122223333:function:check"))
    gate = ConditionStep(name="DataOk", conditions=[ConditionEquals(left=status, right="ok")], if_steps=[],
                         else_steps=[FailStep(name="DataBad", error_message="the data check failed")])
    return Pipeline(name="gated", steps=[check, gate]).definition()


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    definition = tmp_path / "gated.json"
    if not definition.exists():
        definition.write_text(lambda_pipeline())
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(tmp_path / "work"), "--tracking-uri", "off", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def steps(tmp_path: Path, done: subprocess.CompletedProcess) -> dict:
    execution = next(line.split()[4] for line in done.stdout.splitlines() if line.startswith("trainpipe run --local"))
    record = json.loads((tmp_path / "work" / "runs" / execution / "execution.json").read_text())
    return {s["name"]: s for s in record["steps"]}


def test_a_stub_value_feeds_the_condition_and_the_default_name_is_said(tmp_path):
    done = run(tmp_path, "--stub", "CheckData.status=ok")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert ("pipeline name: gated (the definition file's name, as no --pipeline-name was given); on SageMaker "
            "it is the name the pipeline is created with") in done.stdout
    got = steps(tmp_path, done)
    assert got["CheckData"]["properties"] == {"OutputParameters": {"status": "ok"}}
    assert got["DataOk"]["detail"] == "ok == ok is true -> if branch"

    failed = run(tmp_path, "--stub", "CheckData.status=empty", "--pipeline-name", "DataGate")
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1].endswith("Failed: the data check failed")
    assert "pipeline name:" not in failed.stdout and "execution" in failed.stdout and "of DataGate" in failed.stdout


def test_skip_never_reports_succeeded(tmp_path):
    done = run(tmp_path, "--stub-unsupported", "skip")
    readme_record.record(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 130
    assert done.stderr.strip().splitlines()[-1].endswith(
        "Stopped: --stub-unsupported skip left 1 step(s) not run (CheckData); SageMaker would have run them, "
        "so this execution is Stopped (SageMaker's state for an execution that ended before all its steps ran, "
        "none failing), not Succeeded")
    got = steps(tmp_path, done)
    assert got["CheckData"]["status"] == got["DataOk"]["status"] == "NotExecuted"


@pytest.mark.parametrize(("args", "message"), [
    (["--stub", "CheckData=ok"], "--stub 'CheckData=ok': expected STEP.OUTPUT=VALUE, e.g. --stub CheckData.status=ok"),
    (["--stub", "CheckData.state=ok"],
     "--stub CheckData.state: Lambda step CheckData declares no output 'state' (its OutputParameters: status)"),
])
def test_stub_values_are_refused_in_one_line(tmp_path, args, message):
    done = run(tmp_path, *args)
    readme_record.record(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == f"trainpipe run: error: {message}"


def test_max_parallel_steps_is_a_positive_number(tmp_path):
    done = run(tmp_path, "--max-parallel-steps", "0")
    assert done.returncode == 2
    assert "--max-parallel-steps: expected a whole number of at least 1, got '0'" in done.stderr


def test_a_name_written_in_the_file_is_said_to_be_so_even_when_it_equals_the_files_stem():
    import argparse

    from pipeline.cli.local.run_options import pipeline_name_line

    args = argparse.Namespace(definition="/tmp/abalone.json", setting_pipeline_name=None)
    assert "(written in the definition file," in pipeline_name_line(args, "abalone", written=True)
    assert "(the definition file's name," in pipeline_name_line(args, "abalone", written=False)
    args.setting_pipeline_name = "abalone"
    assert pipeline_name_line(args, "abalone", written=False) is None
