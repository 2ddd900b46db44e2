"""Independent steps side by side (``pipeline/local/dag/scheduler.py``): through the CLI, a
definition the SageMaker SDK builds whose two processing steps sleep overlap in time; with
stand-in steps, the limit, a failure beside running steps, and a stop.

The CLI test runs two 2-second jobs side by side, then the same execution from the cache
(about 12 s on 2 shared cores); the rest take a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from pipeline.local.dag.interpreter import StepNode
from pipeline.local.dag.scheduler import ALONE, QUICK, SIDE_BY_SIDE, Scheduler, widest
from pipeline.tracking.target import SWITCH_ENV_VAR

REPO = Path(__file__).resolve().parents[4]
GENEROUS_S = 60  # for what takes ms when idle: a loaded 2-core CI machine may stall a thread for seconds
# A stop ends steps that would sleep 30 s in ~0.3 s when idle; the bound leaves a loaded machine room.
STOPPED_WITHIN_S = 15

SLEEP = """
import time, pathlib
time.sleep(2)
print("slept", flush=True)
pathlib.Path("/opt/ml/processing/output/done.txt").write_text("done")
"""


def sleeping_pipeline(session, bucket: str, code: Path):
    """Two processing steps that read nothing of each other, and a third that waits for both."""
    from sagemaker import image_uris
    from sagemaker.processing import ProcessingInput, ProcessingOutput, ScriptProcessor
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import CacheConfig, ProcessingStep

    image = image_uris.retrieve("sklearn", "us-east-1", version="1.2-1")
    processor = ScriptProcessor(image_uri=image, command=["python3"], instance_type="ml.m5.xlarge",
                                instance_count=1, role="arn:aws:iam::111122223333:role/SageMaker",
                                sagemaker_session=session)

    def step(name, inputs=()):
        output = ProcessingOutput(output_name="out", source="/opt/ml/processing/output",
                                  destination=f"s3://{bucket}/{name}")
        return ProcessingStep(name=name, step_args=processor.run(inputs=list(inputs), outputs=[output],
                                                                 code=str(code)),
                              cache_config=CacheConfig(enable_caching=True, expire_after="PT1H"))

    left, right = step("Left"), step("Right")
    both = [ProcessingInput(source=s.properties.ProcessingOutputConfig.Outputs["out"].S3Output.S3Uri,
                            destination=f"/opt/ml/processing/input/{s.name}") for s in (left, right)]
    return Pipeline(name="sleepers", steps=[left, right, step("Join", both)], sagemaker_session=session)


def test_two_independent_steps_overlap_in_time(tmp_path):
    from pipeline.local.store.session import LocalStoreSession

    code = tmp_path / "sleep.py"
    code.write_text(SLEEP)
    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket="par-bucket")
    definition = tmp_path / "sleepers.json"
    definition.write_text(sleeping_pipeline(session, "par-bucket", code).definition())

    # Logged to MLflow as a user's run is (the tests' switch off removed): the workdir's own store.
    env = {k: v for k, v in os.environ.items() if k != SWITCH_ENV_VAR}

    def run():
        return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                               "--workdir", str(workdir)],
                              cwd=REPO, capture_output=True, text=True, timeout=600, env=env)

    done = run()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "independent steps run side by side: up to 2 at once (--max-parallel-steps 50)" in done.stdout
    # The live output: a step's job lines carry its name while it runs beside another.
    shown = done.stdout.splitlines()
    assert "Left | [algo-1] slept" in shown and "Right | [algo-1] slept" in shown and "[algo-1] slept" in shown
    (record,) = (workdir / "runs").glob("*/execution.json")
    steps = {s["name"]: s for s in json.loads(record.read_text())["steps"]}
    at = {name: (datetime.fromisoformat(s["start"]), datetime.fromisoformat(s["end"])) for name, s in steps.items()}
    (left_start, left_end), (right_start, right_end) = at["Left"], at["Right"]
    # Each slept 2 s; side by side, each started before the other ended.
    assert left_start < right_end and right_start < left_end
    overlap = (min(left_end, right_end) - max(left_start, right_start)).total_seconds()
    assert overlap > 1.5, at
    # The step that reads both started after both had ended.
    assert at["Join"][0] >= max(left_end, right_end)
    # MLflow (the embedded store): a child run per step, each ended.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("sleepers").experiment_id])
    children = {r.info.run_name: r.info.status for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert children == {"Left": "FINISHED", "Right": "FINISHED", "Join": "FINISHED"}, children

    # Again: both side-by-side steps are served from the cache they wrote at once.
    again = run()
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    record = max((workdir / "runs").glob("*/execution.json"), key=lambda p: p.stat().st_mtime)
    assert all(s["cache_hit"] for s in json.loads(record.read_text())["steps"])


def test_ctrl_c_stops_both_steps_running_side_by_side_and_leaves_no_process(tmp_path):
    from pipeline.local.store.session import LocalStoreSession
    from tests.pipeline.local.helpers import leftover_processes

    code = tmp_path / "sleep.py"
    code.write_text(SLEEP.replace("time.sleep(2)", "time.sleep(120)"))
    workdir = tmp_path / "work"
    definition = tmp_path / "sleepers.json"
    definition.write_text(sleeping_pipeline(LocalStoreSession(workdir=workdir, bucket="par-bucket"), "par-bucket",
                                            code).definition())
    process = subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                                "--workdir", str(workdir), "--quiet", "--tracking-uri", "off"],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "] Right (Processing)" in line:
            break
    time.sleep(1.5)  # both jobs started (one still staging is stopped at its first poll)
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    (record,) = (workdir / "runs").glob("*/execution.json")
    steps = {s["name"]: s["status"] for s in json.loads(record.read_text())["steps"]}
    assert steps == {"Left": "Stopped", "Right": "Stopped"}, output
    assert leftover_processes(str(workdir)) == []


# --- the scheduler with stand-in steps --------------------------------------------------------
def node(name: str, *deps: str, kind: str = "Processing") -> StepNode:
    return StepNode(name, kind, {}, tuple(deps))


class Steps:
    """Stand-in steps: each sleeps ``seconds`` (on whichever thread runs it) and fails when named."""

    def __init__(self, seconds: float = 0.3, failing=(), places=None):
        self.seconds, self.failing, self.places = seconds, set(failing), places or {}
        self.log: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()
        self.now = 0

    def _note(self, name, what):
        with self.lock:
            self.log.append((name, what, time.monotonic()))
            if what == "start":
                self.now += 1
            elif what == "end":
                self.now -= 1

    def settle(self, node):
        return False

    def placement(self, node):
        return self.places.get(node.name, SIDE_BY_SIDE)

    def begin(self, node):
        self._note(node.name, "begin")

    def perform(self, node, stop):
        self._note(node.name, "start")
        try:
            if stop is not None and stop.wait(self.seconds):
                raise KeyboardInterrupt
            if stop is None:
                time.sleep(self.seconds)
            return node.name not in self.failing
        finally:
            self._note(node.name, "end")

    def conclude(self, node, ok, error):
        self._note(node.name, "stopped" if isinstance(error, KeyboardInterrupt) else "ok" if ok else "failed")

    def most_at_once(self) -> int:
        now = top = 0
        for _, what, _ in self.log:
            now += {"start": 1, "end": -1}.get(what, 0)
            top = max(top, now)
        return top

    def outcome(self, name):
        return next(what for n, what, _ in self.log if n == name and what in ("ok", "failed", "stopped"))


def test_no_more_steps_run_at_once_than_the_limit():
    steps = Steps()
    Scheduler([node(n) for n in "ABCD"], steps, max_parallel=2).run()
    assert steps.most_at_once() == 2
    assert {steps.outcome(n) for n in "ABCD"} == {"ok"}


def test_a_failed_step_lets_the_running_ones_finish_and_starts_nothing_more():
    # A fails while B runs; C (after A) and D (independent, beyond the limit) never start.
    steps = Steps(failing={"A"})
    steps.seconds = 0.3
    # B ends only once A's failure is concluded, however a loaded machine schedules the two threads
    # (if B ended first, its free slot would start D before A's failure was seen).
    a_concluded = threading.Event()
    conclude, perform = steps.conclude, steps.perform

    def concluding(node, ok, error):
        conclude(node, ok, error)
        if node.name == "A":
            a_concluded.set()

    def performing(node, stop):
        ok = perform(node, stop)
        if node.name == "B":
            assert a_concluded.wait(GENEROUS_S), "A's failure was never concluded"
        return ok

    steps.conclude, steps.perform = concluding, performing
    failed = Scheduler([node("A"), node("B"), node("C", "A"), node("D")], steps, max_parallel=2).run()
    assert failed.name == "A"
    assert steps.outcome("B") == "ok"  # SageMaker: concurrent steps run to completion
    assert not [n for n, what, _ in steps.log if n in ("C", "D")]


def test_a_stop_stops_every_running_step_and_waits_for_it():
    steps = Steps(seconds=30)
    scheduler = Scheduler([node("A"), node("B")], steps, max_parallel=2)
    scheduler_interrupt = threading.Event()  # stands in for Ctrl-C, which only the main thread sees
    threading.Timer(0.3, scheduler_interrupt.set).start()

    def sleep(seconds):
        if scheduler_interrupt.is_set():
            raise KeyboardInterrupt
        time.sleep(seconds)

    scheduler.sleep = sleep
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        scheduler.run()
    assert time.monotonic() - started < STOPPED_WITHIN_S
    assert steps.outcome("A") == steps.outcome("B") == "stopped"
    assert not scheduler.running


def test_a_lone_step_runs_on_the_schedulers_thread_and_quick_or_alone_steps_wait_their_turn():
    steps = Steps(seconds=0.1, places={"Cond": QUICK, "Tune": ALONE})
    threads = {}
    perform = steps.perform
    steps.perform = lambda n, stop: threads.setdefault(n.name, threading.current_thread().name) and perform(n, stop)
    Scheduler([node("A"), node("B"), node("Tune"), node("Cond", "A", "B"), node("Last", "Cond")],
              steps, max_parallel=5).run()
    assert threads["A"] == "step-A" and threads["B"] == "step-B"  # side by side, each on its thread
    assert threads["Last"] == threads["Tune"] == threads["Cond"] == threading.current_thread().name
    # The Tuning step ran with nothing beside it.
    tune = [t for n, what, t in steps.log if n == "Tune" and what in ("start", "end")]
    others = [(n, t) for n, what, t in steps.log if n in ("A", "B") and what in ("start", "end")]
    assert all(not (tune[0] < t < tune[1]) for _, t in others)


def test_widest_counts_job_steps_at_one_depth():
    nodes = [node("A"), node("B"), node("C", "A"), node("D", "A"), node("E", "A"), node("F", "C", "D", "E")]
    assert widest(nodes, lambda n: True) == 3
    assert widest(nodes, lambda n: n.name != "D") == 2
    assert widest([node("A"), node("B", "A")], lambda n: True) == 1


def test_each_step_beside_others_runs_on_its_own_cores():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one core: nothing to divide")
    steps = Steps(seconds=0.2)
    seen = {}
    perform = steps.perform
    steps.perform = lambda n, stop: seen.setdefault(n.name, os.sched_getaffinity(0)) and perform(n, stop)
    Scheduler([node("A"), node("B")], steps, max_parallel=2, slots=[[cpus[0]], [cpus[1]]]).run()
    assert seen == {"A": {cpus[0]}, "B": {cpus[1]}}
    assert os.sched_getaffinity(0) == set(cpus)  # the scheduler's own thread keeps every core
