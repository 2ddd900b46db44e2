"""Lambda and Callback steps, run on this machine (SageMaker's own local mode refuses both).

- **Lambda**: ``--lambda NAME=path/handler.py:function`` names the local handler that stands in
  for the step's ``FunctionArn``. It runs in a process of its own, called as Lambda calls it:
  ``function(event, context)`` with the step's evaluated ``Arguments`` (its ``inputs``) as the
  event. Its return value must be a dict holding every declared ``OutputParameters`` name
  (AWS: "The outputs value must be a list of keys. These keys refer to a dictionary defined in
  the output of the Lambda function"); later steps read them as
  ``Steps.NAME.OutputParameters['key']``. AWS: the ``Lambda`` class's timeout "default value
  is 120 seconds with a maximum value of 10 minutes. If the Lambda function is running when
  the timeout is met, the Lambda step fails" (the definition does not carry the function's
  timeout, so 120 s here). A Lambda step with no handler given is refused before the run, or
  stubbed (``stubs.py``). The handler's process gets what a job gets of the runner's
  environment (no credential; ``handler_environment``) and a HOME of its own.
- **Callback**: SageMaker sends the step's inputs and a token to an SQS queue and waits for
  ``SendPipelineExecutionStepSuccess`` / ``SendPipelineExecutionStepFailure``. Here the step
  writes that message (token, inputs) to ``<run dir>/callbacks/<step>.message.json`` and waits
  for ``trainpipe callback success|failure EXECUTION STEP [--output k=v ...] [--reason TEXT]``
  from any other process, which writes ``<step>.answer.json``; with ``--callback-timeout
  SECONDS`` it fails when none comes in time (the definition carries no timeout for it).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from pipeline.environment import scrubbed
from pipeline.local.dag import interpreter
from pipeline.local.execution import FAILED, SUCCEEDED, StepRecord
from pipeline.local.store.private import write_private

STEP_LAMBDA, STEP_CALLBACK = "Lambda", "Callback"
LAMBDA_TIMEOUT_SECONDS = 120  # AWS: the Lambda class's default timeout
POLL_SECONDS = 0.1
CALLBACKS = "callbacks"
SUCCESS, FAILURE = "success", "failure"

# The handler's process: load the file, call the function as Lambda does, write its answer.
_DRIVER = r"""
import importlib.util, json, sys, time, uuid, pathlib
path, function, event_file, result_file, name, timeout = sys.argv[1:7]
sys.path.insert(0, str(pathlib.Path(path).parent))
deadline = time.time() + float(timeout)
class Context:
    function_name = name
    aws_request_id = str(uuid.uuid4())
    def get_remaining_time_in_millis(self):
        return max(0, int((deadline - time.time()) * 1000))
spec = importlib.util.spec_from_file_location("lambda_handler_module", path)
module = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(module)
    answer = {"result": getattr(module, function)(json.loads(open(event_file).read()), Context())}
except Exception as error:
    import traceback
    traceback.print_exc()
    answer = {"errorType": type(error).__name__, "errorMessage": str(error)}
pathlib.Path(result_file).write_text(json.dumps(answer, default=str))
"""


def parse_handlers(items: list[str]) -> dict[str, tuple[Path, str]]:
    """``--lambda NAME=path/handler.py:function`` (repeated) -> {step: (file, function)}."""
    from pipeline.errors import UserError

    handlers = {}
    for item in items:
        name, sep, target = item.partition("=")
        path, colon, function = target.rpartition(":")
        if not sep or not name or not colon or not path or not function.isidentifier():
            raise UserError(f"--lambda {item!r}: expected STEP=path/handler.py:function")
        if not Path(path).expanduser().is_file():
            raise UserError(f"--lambda {name}={target}: no such file {path}")
        handlers[name] = (Path(path).expanduser().resolve(), function)
    return handlers


def check(nodes, handlers: Mapping[str, tuple[Path, str]]) -> None:
    """Each --lambda names a Lambda step of the definition."""
    from pipeline.local.dag.interpreter import DefinitionError

    lambdas = [n.name for n in nodes if n.type == STEP_LAMBDA]
    for name in handlers:
        if name not in lambdas:
            raise DefinitionError(f"--lambda {name}=...: the definition has no Lambda step {name} "
                                  f"(its Lambda steps: {', '.join(lambdas) or 'none'})")


def _declared(node) -> list[str]:
    return [o["OutputName"] for o in node.body.get("OutputParameters") or [] if o.get("OutputName")]


def run_lambda(runner, node, record: StepRecord, stop) -> bool:
    path, function = runner.options.lambdas[node.name]
    event = interpreter.evaluate(node.body.get("Arguments") or {}, runner.ctx)
    folder = runner.run_dir / "lambdas" / node.name
    folder.mkdir(parents=True, exist_ok=True)
    write_private(folder / "event.json", json.dumps(event, indent=2, default=str))
    result_file, log = folder / "result.json", folder / "handler.log"
    record.job_dir = str(folder)
    runner.say(f"    {node.name}: {path.name}:{function}(event, context), its log {log}")
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", _DRIVER, str(path), function, str(folder / "event.json"), str(result_file),
             node.name, str(LAMBDA_TIMEOUT_SECONDS)],
            cwd=path.parent, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=handler_environment(folder))
    try:
        deadline = time.monotonic() + LAMBDA_TIMEOUT_SECONDS
        while process.poll() is None:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                record.status = FAILED
                record.failure_reason = (f"the Lambda function {path.name}:{function} ran past its timeout "
                                         f"({LAMBDA_TIMEOUT_SECONDS} s, AWS's default); see {log}")
                return False
            time.sleep(POLL_SECONDS)
    finally:
        if process.poll() is None:  # stopped or timed out: its process goes with the step
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    answer = json.loads(result_file.read_text()) if result_file.is_file() else {
        "errorType": "ProcessExited", "errorMessage": f"the handler's process exited {process.returncode}"}
    if "result" not in answer:
        record.status = FAILED
        record.failure_reason = f"{answer['errorType']}: {answer['errorMessage']} (in {path.name}:{function}; see {log})"
        return False
    return _outputs(node, record, answer["result"], f"{path.name}:{function} returned")


def handler_environment(folder: Path) -> dict[str, str]:
    """What a handler's process gets: what a job gets of the runner's environment (the
    allowlist, ``pipeline/environment.py``: no credential) and a HOME of its own. AWS: a
    function has its own role's credentials, never the caller's."""
    env = scrubbed(os.environ)
    home = folder / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    env["HOME"] = str(home)
    return env


def _outputs(node, record: StepRecord, values, source: str) -> bool:
    declared = _declared(node)
    missing = [n for n in declared if not isinstance(values, Mapping) or n not in values]
    if missing:
        record.status = FAILED
        got = sorted(values) if isinstance(values, Mapping) else type(values).__name__
        record.failure_reason = (f"{source} no value for the step's output(s) {', '.join(missing)} "
                                 f"(it gave: {got})")
        return False
    record.properties = {"OutputParameters": {n: values[n] for n in declared}}
    record.detail = ", ".join(f"{n}={values[n]}" for n in declared) or None
    record.status = SUCCEEDED
    return True


# --- Callback ----------------------------------------------------------------------------------
def callback_files(run_dir: Path, step: str) -> tuple[Path, Path]:
    folder = Path(run_dir) / CALLBACKS
    return folder / f"{step}.message.json", folder / f"{step}.answer.json"


def run_callback(runner, node, record: StepRecord, stop) -> bool:
    message_file, answer_file = callback_files(runner.run_dir, node.name)
    message_file.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(5)  # SageMaker: a 10-character token
    message = {"token": token, "arguments": interpreter.evaluate(node.body.get("Arguments") or {}, runner.ctx),
               "status": "Executing", "sqsQueueUrl": node.body.get("SqsQueueUrl")}
    write_private(message_file, json.dumps(message, indent=2, default=str))
    record.job_dir = str(message_file.parent)
    outputs = " ".join(f"--output {n}=VALUE" for n in _declared(node))
    runner.say(f"    {node.name} waits for its callback (the message SageMaker would send: {message_file}): "
               f"trainpipe callback success {runner.execution_id} {node.name} {outputs} --workdir {runner.workdir}"
               f" (or: failure ... --reason TEXT)")
    timeout = runner.options.callback_timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    while not answer_file.is_file():
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt
        if deadline is not None and time.monotonic() > deadline:
            record.status = FAILED
            record.failure_reason = f"no callback within --callback-timeout {timeout:g} s"
            return False
        time.sleep(POLL_SECONDS)
    answer = json.loads(answer_file.read_text())
    if answer.get("status") == FAILURE:
        record.status = FAILED
        record.failure_reason = f"callback failure: {answer.get('reason') or 'no reason given'}"
        return False
    return _outputs(node, record, answer.get("outputs") or {}, "the callback gave")


def answer(run_dir: Path, definition_nodes, step: str, status: str, outputs: Mapping[str, str],
           reason: str | None) -> Path:
    """What ``trainpipe callback`` does: checks the step waits, then writes its answer."""
    from pipeline.errors import UserError

    message_file, answer_file = callback_files(run_dir, step)
    node = next((n for n in definition_nodes if n.name == step), None)
    if node is None or node.type != STEP_CALLBACK:
        callbacks = [n.name for n in definition_nodes if n.type == STEP_CALLBACK]
        raise UserError(f"execution {Path(run_dir).name} has no Callback step {step} "
                        f"(its Callback steps: {', '.join(callbacks) or 'none'})")
    if not message_file.is_file() or answer_file.is_file():
        raise UserError(f"Callback step {step} of execution {Path(run_dir).name} is not waiting for a callback "
                        f"({'it has its answer' if answer_file.is_file() else 'it has not started'})")
    unknown = sorted(set(outputs) - set(_declared(node)))
    if unknown:
        raise UserError(f"--output {unknown[0]}: Callback step {step} declares no output {unknown[0]!r} "
                        f"(its OutputParameters: {', '.join(_declared(node)) or 'none'})")
    partial = answer_file.with_suffix(".partial")
    write_private(partial, json.dumps({"status": status, "outputs": dict(outputs), "reason": reason}))
    partial.replace(answer_file)  # whole or not at all: the runner polls for it
    return answer_file
