"""When each step of an execution runs: as soon as the steps it depends on have ended, and
independent steps side by side, as SageMaker Pipelines runs them.

AWS, "Pipeline Structure and Execution" (docs.aws.amazon.com/sagemaker/latest/dg/
build-and-manage-pipeline.html): "By default, a pipeline performs all steps that are available
to run in parallel", and, of ``ParallelismConfiguration``: "if two executions are started they
can each run a maximum of 50 steps concurrently". So at most ``DEFAULT_MAX_PARALLEL_STEPS``
(50) at once unless ``--max-parallel-steps`` (``MaxParallelExecutionSteps``) says fewer.

AWS, "Add a step", Fail step (docs.aws.amazon.com/sagemaker/latest/dg/
build-and-manage-steps-types.html#step-type-fail): "When a Fail step and other pipeline steps
execute at the same time, the pipeline does not terminate until all concurrent steps are
completed." So when a step fails (a Fail step or any other), no further step starts and the
steps already running run to their end; then the execution is Failed. A stop (Ctrl-C, SIGTERM)
stops every running step.

Where each step runs (``Steps.placement``):

- ``QUICK``: steps with no job (Condition, Fail, RegisterModel, a stub): on the scheduler's
  thread, at once;
- ``ALONE``: a Tuning step (its trials already share the machine's cores side by side) and a
  Transform step: on the scheduler's thread, when no other step runs;
- ``SIDE_BY_SIDE``: job steps (Processing, Training, Lambda, Callback): a step that is the only
  one ready while nothing runs runs on the scheduler's thread; otherwise each runs on a thread
  of its own, pinned to its share of the cores (``slots``), so the rank-thread rule of its
  processes divides that share, as a tuning job's trials divide theirs. Only this thread sees
  signals: a stop reaches the others through their ``threading.Event``.

This module decides and waits; ``runner.py`` records, prints and runs the steps
(``Steps``). Jobs know nothing of their siblings.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pipeline.local.dag.interpreter import StepNode

# AWS: each execution runs at most 50 steps concurrently (the module's docstring).
DEFAULT_MAX_PARALLEL_STEPS = 50
QUICK, ALONE, SIDE_BY_SIDE = "quick", "alone", "side by side"
POLL_SECONDS = 0.05


class Steps(Protocol):
    """What the scheduler asks of whoever runs the steps (the runner)."""

    def settle(self, node: StepNode) -> bool:
        """Record a step that does not run (its branch not taken, a dependency that did not
        run, a stub); True when it was settled so."""

    def placement(self, node: StepNode) -> str: ...

    def begin(self, node: StepNode) -> None:
        """Its record and its line, on the scheduler's thread, before it runs."""

    def perform(self, node: StepNode, stop: threading.Event | None) -> bool:
        """Run it (on any thread); whether it succeeded. ``stop``: set when it must stop."""

    def conclude(self, node: StepNode, ok: bool, error: BaseException | None) -> None:
        """Its end, on the scheduler's thread: record, line, tracking."""


@dataclass
class Running:
    node: StepNode
    cpus: list[int] | None
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    ok: bool = False
    error: BaseException | None = None

    def start(self, perform: Callable[[StepNode, threading.Event], bool]) -> None:
        def body() -> None:
            if self.cpus is not None:
                with contextlib.suppress(AttributeError, OSError):  # not Linux: every core
                    os.sched_setaffinity(0, set(self.cpus))  # this thread: its job's processes inherit it
            try:
                self.ok = perform(self.node, self.stop)
            except BaseException as error:  # noqa: BLE001 - the step's end, told on the scheduler's thread
                self.error = error

        self.thread = threading.Thread(target=body, name=f"step-{self.node.name}", daemon=True)
        self.thread.start()


def widest(nodes: list[StepNode], side_by_side: Callable[[StepNode], bool]) -> int:
    """How many job steps may run at once, counted by depth in the DAG: the most of them at
    one depth (steps at one depth never depend on each other)."""
    depth: dict[str, int] = {}
    for node in nodes:  # in dependency order (interpreter.plan)
        depth[node.name] = 1 + max((depth[d] for d in node.depends_on), default=0)
    counts: dict[int, int] = {}
    for node in nodes:
        if side_by_side(node):
            counts[depth[node.name]] = counts.get(depth[node.name], 0) + 1
    return max(counts.values(), default=0)


class Scheduler:
    def __init__(self, nodes: list[StepNode], steps: Steps, *, max_parallel: int,
                 slots: list[list[int]] | None = None, sleep: Callable[[float], None] = time.sleep,
                 deferred: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext):
        self.nodes = list(nodes)
        self.steps = steps
        self.max_parallel = max(1, int(max_parallel))
        self.free = list(slots or [])  # cores not held by a running step
        self.sleep = sleep
        # The runner's interrupts_deferred (hosts/processes.py, which this layer cannot import).
        self.deferred = deferred
        self.running: dict[str, Running] = {}
        self.failed: StepNode | None = None  # the first step that failed
        self.pending: list[StepNode] = []
        self.ended: set[str] = set()

    def run(self) -> StepNode | None:
        """Every step that can run, run; the first that failed, or None. A KeyboardInterrupt
        (Ctrl-C, SIGTERM) stops the steps running on threads and waits for them, then goes on."""
        self.pending = list(self.nodes)
        try:
            while True:
                self._launch()
                if not self.running:
                    return self.failed
                if not self._reap():
                    self.sleep(POLL_SECONDS)
        except KeyboardInterrupt:
            self._stop_all()
            raise

    # --- starting ----------------------------------------------------------------------------
    def _launch(self) -> None:
        """Start (or settle) every step whose dependencies have ended, until none can."""
        while self.failed is None:
            ready = [n for n in self.pending if set(n.depends_on) <= self.ended]
            if not self._start_one(ready):
                return

    def _start_one(self, ready: list[StepNode]) -> bool:
        for node in ready:
            if self.steps.settle(node):
                self._ended(node)
                return True
        placements = {n.name: self.steps.placement(n) for n in ready}
        jobs = [n for n in ready if placements[n.name] == SIDE_BY_SIDE]
        for node in ready:
            place = placements[node.name]
            inline = (place == QUICK or (place == ALONE and not self.running)
                      or (place == SIDE_BY_SIDE and not self.running and len(jobs) == 1))
            if inline:
                self._run_here(node)
                return True
            if place == SIDE_BY_SIDE and len(self.running) < self.max_parallel:
                self._run_beside(node)
                return True
        return False

    def _run_here(self, node: StepNode) -> None:
        self.pending.remove(node)
        self.steps.begin(node)
        ok = self.steps.perform(node, None)  # a stop here is this thread's KeyboardInterrupt
        self.steps.conclude(node, ok, None)
        self._ended(node, ok)

    def _run_beside(self, node: StepNode) -> None:
        self.pending.remove(node)
        self.steps.begin(node)
        running = Running(node, self.free.pop(0) if self.free else None)
        self.running[node.name] = running
        running.start(self.steps.perform)

    def _ended(self, node: StepNode, ok: bool = True) -> None:
        if node in self.pending:
            self.pending.remove(node)
        self.ended.add(node.name)
        if not ok and self.failed is None:
            self.failed = node

    # --- waiting -----------------------------------------------------------------------------
    def _reap(self) -> bool:
        """Conclude the steps whose threads have ended; whether any had."""
        done = [r for r in self.running.values() if not r.thread.is_alive()]
        for running in done:
            running.thread.join()
            del self.running[running.node.name]
            if running.cpus is not None:
                self.free.append(running.cpus)
            ok = running.ok and running.error is None
            self.steps.conclude(running.node, ok, running.error)
            self._ended(running.node, ok)
        return bool(done)

    def _stop_all(self) -> None:
        """Every running step is told to stop and waited for; each is concluded (Stopped).
        A second Ctrl-C does not cut this short: the steps' processes must not outlive it."""
        with self.deferred():
            for running in self.running.values():
                running.stop.set()
            while self.running:
                for running in list(self.running.values()):
                    running.thread.join(timeout=POLL_SECONDS)
                self._reap()
