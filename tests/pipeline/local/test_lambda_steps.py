"""Lambda and Callback steps (pipeline/local/lambda_steps.py) through the CLI's process: an
SDK-built pipeline whose Lambda step runs a local handler (--lambda) and whose Callback step is
answered by `trainpipe callback` from a second process; a condition reads both outputs.

No job runs: a few seconds of CLI start-up per process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import readme_record

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.filterwarnings("ignore:Lambda function won't be updated:UserWarning")

HANDLER = """
def score(event, context):
    assert context.get_remaining_time_in_millis() > 0
    return {"accuracy": 0.93 if event["model"] == "m-1" else 0.5, "unused": "x"}
"""


def gated_pipeline() -> str:
    """Score (a Lambda) -> Approve (a Callback, given the score) -> Gate on both -> else Fail."""
    from sagemaker.lambda_helper import Lambda
    from sagemaker.workflow.callback_step import (
        CallbackOutput,
        CallbackOutputTypeEnum,
        CallbackStep,
    )
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionEquals, ConditionGreaterThanOrEqualTo
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
    from sagemaker.workflow.parameters import ParameterString
    from sagemaker.workflow.pipeline import Pipeline

    model = ParameterString(name="Model", default_value="m-1")
    accuracy = LambdaOutput(output_name="accuracy", output_type=LambdaOutputTypeEnum.Float)
    score = LambdaStep(name="Score", inputs={"model": model}, outputs=[accuracy],
                       lambda_func=Lambda(function_arn="arn:aws:lambda:us-east-1:111122223333:function:score"))
    decision = CallbackOutput(output_name="decision", output_type=CallbackOutputTypeEnum.String)
    approve = CallbackStep(name="Approve", sqs_queue_url="https://sqs.us-east-1.amazonaws.com/111122223333/approvals",
                           inputs={"accuracy": accuracy}, outputs=[decision])
    gate = ConditionStep(name="Gate", conditions=[ConditionGreaterThanOrEqualTo(left=accuracy, right=0.9),
                                                  ConditionEquals(left=decision, right="yes")],
                         if_steps=[], else_steps=[FailStep(name="Rejected", error_message="not approved")])
    return Pipeline(name="gated", parameters=[model], steps=[score, approve, gate]).definition()


def trainpipe(*args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def waiting_message(workdir: Path, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(workdir.glob("runs/*/callbacks/Approve.message.json"))
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError("the Callback step never started waiting")


def test_a_lambda_handler_and_a_callback_from_a_second_process_feed_a_condition(tmp_path):
    (tmp_path / "handler.py").write_text(HANDLER)
    definition = tmp_path / "gated.json"
    definition.write_text(gated_pipeline())
    workdir = tmp_path / "work"
    run = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                    "--tracking-uri", "off", "--lambda", f"Score={tmp_path / 'handler.py'}:score")
    try:
        message_file = waiting_message(workdir)
        message = json.loads(message_file.read_text())
        assert message["arguments"] == {"accuracy": 0.93} and len(message["token"]) == 10
        execution = message_file.parents[1].name
        # A wrong output name is refused; the step keeps waiting.
        wrong = trainpipe("callback", "success", execution, "Approve", "--output", "verdict=yes",
                          "--workdir", str(workdir))
        assert wrong.wait(60) == 2
        refusal = wrong.stderr.read().strip().splitlines()[-1]
        readme_record.record(refusal)
        assert refusal == (
            "trainpipe callback: error: --output verdict: Callback step Approve declares no output 'verdict' (its OutputParameters: decision)")
        sent = trainpipe("callback", "success", execution, "Approve", "--output", "decision=yes",
                         "--workdir", str(workdir))
        assert sent.wait(60) == 0, sent.stderr.read()
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, out[-2000:] + err[-2000:]
    assert f"trainpipe callback success {execution} Approve --output decision=VALUE" in out
    steps = {s["name"]: s for s in json.loads((workdir / "runs" / execution / "execution.json").read_text())["steps"]}
    assert steps["Score"]["properties"] == {"OutputParameters": {"accuracy": 0.93}}
    assert steps["Approve"]["properties"] == {"OutputParameters": {"decision": "yes"}}
    assert steps["Gate"]["detail"] == "0.93 >= 0.9 is true and yes == yes is true -> if branch"
    # The answered step takes no second answer.
    again = trainpipe("callback", "failure", execution, "Approve", "--workdir", str(workdir))
    assert again.wait(60) == 2
    refusal = again.stderr.read().strip().splitlines()[-1]
    readme_record.record(refusal)
    assert refusal.endswith(f"Callback step Approve of execution {execution} is not waiting for a callback "
                            "(it has its answer)")


def test_a_handler_that_returns_no_declared_output_fails_its_step(tmp_path):
    (tmp_path / "handler.py").write_text("def score(event, context):\n    return {'unused': 1}\n")
    definition = tmp_path / "gated.json"
    definition.write_text(gated_pipeline())
    run = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(tmp_path / "work"),
                    "--tracking-uri", "off", "--lambda", f"Score={tmp_path / 'handler.py'}:score")
    out, err = run.communicate(timeout=120)
    readme_record.record(err.strip().splitlines()[-1])
    assert run.returncode == 1
    assert err.strip().splitlines()[-1].endswith(
        "Failed: step Score failed: handler.py:score returned no value for the step's output(s) accuracy "
        "(it gave: ['unused'])")


# --- in this process: the runner with an answer written beside it -------------------------------
def runner(tmp_path, **options):
    from pipeline.local.runner import PipelineRunner, RunOptions
    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.test_runner import Capture

    run_options = RunOptions(workdir=tmp_path / "work", storage=LocalStorage(tmp_path / "store"), echo=False,
                             stream=Capture(), **options)
    return PipelineRunner(json.loads(gated_pipeline()), "gated", run_options)


def test_a_callback_failure_fails_its_step_and_no_answer_in_time_fails_it_too(tmp_path, monkeypatch):
    import threading

    from pipeline.local import lambda_steps

    (tmp_path / "handler.py").write_text(HANDLER)
    handlers = lambda_steps.parse_handlers([f"Score={tmp_path / 'handler.py'}:score"])
    run = runner(tmp_path, lambdas=handlers)

    def answer_when_asked():
        message, _ = lambda_steps.callback_files(run.run_dir, "Approve")
        while not message.is_file():
            time.sleep(0.05)
        lambda_steps.answer(run.run_dir, run.nodes, "Approve", "failure", {}, "the reviewer said no")

    threading.Thread(target=answer_when_asked, daemon=True).start()
    record = run.run()
    assert record.failure_reason == "step Approve failed: callback failure: the reviewer said no"

    waited = runner(tmp_path, lambdas=handlers, callback_timeout=1).run()
    assert waited.failure_reason == "step Approve failed: no callback within --callback-timeout 1 s"

    monkeypatch.setattr(lambda_steps, "LAMBDA_TIMEOUT_SECONDS", 1)
    (tmp_path / "handler.py").write_text("import time\ndef score(event, context):\n    time.sleep(30)\n")
    late = runner(tmp_path, lambdas=handlers).run()
    assert late.failure_reason.startswith("step Score failed: the Lambda function handler.py:score ran past "
                                          "its timeout (1 s, AWS's default)")


def test_a_handler_gets_none_of_the_runners_secrets(tmp_path):
    """The handler's process starts from the jobs' allowlist of the runner's environment and a
    HOME of its own; the old code gave it the runner's whole environment, secrets and HOME."""
    import os

    seen = tmp_path / "environ.json"
    (tmp_path / "handler.py").write_text(
        "import json, os\ndef score(event, context):\n"
        f"    open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n    return {{'unused': 1}}\n")
    definition = tmp_path / "gated.json"
    definition.write_text(gated_pipeline())
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": "runner-secret-8d1c", "MLFLOW_TRACKING_TOKEN": "runner-token-8d1c",
           "HOME": str(tmp_path)}
    run = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(tmp_path / "work"),
                    "--tracking-uri", "off", "--lambda", f"Score={tmp_path / 'handler.py'}:score", env=env)
    run.communicate(timeout=120)
    environ = json.loads(seen.read_text())
    assert "PATH" in environ and "8d1c" not in json.dumps(environ)
    assert not {"AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_TOKEN"} & set(environ)
    assert environ["HOME"] != str(tmp_path)
