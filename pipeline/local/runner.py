"""Run a pipeline definition on this machine: one execution.

The runner knows SageMaker's step types, not trainpipe's steps: it takes the definition JSON
(the very document ``trainpipe definition`` prints and SageMaker would be given), orders the
steps by their data dependencies (``interpreter.plan``), evaluates each step's arguments
against the parameters and the properties of the steps before it, and then:

- Processing / Training: runs the job request locally (``job_steps.py``), with the step's
  ``CacheConfig`` (``caching.py``) and ``RetryPolicies`` honoured;
- Tuning: a hyperparameter tuning job (``tuning_step.py``), its trials training jobs run side
  by side on their share of the cores;
- Condition: evaluates the conditions, and the branch not taken is NotExecuted;
- RegisterModel: adds a model package to the local registry (``register_step.py``);
- Fail: ends the execution as Failed with the step's ErrorMessage.

Independent steps run side by side, as on SageMaker, up to ``--max-parallel-steps``
(``dag/scheduler.py`` decides when each starts, and says what SageMaker does). The first failed
step fails the execution: nothing starts after it, and the steps running beside it run to their
end.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pipeline.costs.prices import PriceBook
from pipeline.local import inference_steps, lambda_steps, register_step, tuning_step
from pipeline.local.dag import caching, interpreter, preflight, stubs, training_kinds
from pipeline.local.dag import scheduler as scheduler_module
from pipeline.local.dag.interpreter import (
    STEP_CONDITION,
    STEP_FAIL,
    STEP_PROCESSING,
    STEP_REGISTER_MODEL,
    STEP_TRAINING,
    Context,
    ExpressionError,
    StepNode,
)
from pipeline.local.dag.scheduler import Scheduler
from pipeline.local.execution import (
    EXECUTING,
    FAILED,
    NOT_EXECUTED,
    STOPPED,
    SUCCEEDED,
    ExecutionRecord,
    RunnerLock,
    StepRecord,
    new_execution_id,
    recover_dead_runners,
    reserve,
    timestamp,
)
from pipeline.local.hosts import credentials
from pipeline.local.hosts.launch_settings import usable_cpus
from pipeline.local.hosts.processes import interrupts_deferred, stop_reason
from pipeline.local.job_steps import JOB_NAME_LIMIT, JobSteps, job_name, matching_policy  # noqa: F401 (importers')
from pipeline.local.jobs.environments import before_run, sdk_v3_environment
from pipeline.local.jobs.lifecycle import account_of
from pipeline.local.jobs.tuning.hyperparameter_tuning import cpu_slots
from pipeline.local.jobs.v3.sdk_v3 import check_launch, code_for_image_check
from pipeline.local.store.private import write_private
from pipeline.local.store.registry import Registry
from pipeline.local.store.storage import Storage, StorageError


@dataclass
class RunOptions:
    workdir: Path
    storage: Storage
    region: str = "us-east-1"
    echo: bool = True  # stream job output to the terminal
    use_cache: bool = True
    stream: object = None  # where progress goes (default sys.stdout)
    sleep: Callable[[float], None] = time.sleep  # retry back-off; tests pass a fake
    execution_parameters: Mapping[str, object] = field(default_factory=dict)
    # What to do with step types the runner cannot execute (stubs.py): None refuses them.
    stub_unsupported: str | None = None
    tracker: object | None = None  # pipeline/tracking's Tracker (the CLI's); never raises
    # {s3:// prefix: local file or folder} the CLI copied into the store (-p InputDataUri=~/x):
    # a job's failure names the user's file, not its copy (failures.in_user_paths).
    local_sources: dict[str, Path] = field(default_factory=dict)
    # --stub STEP.OUTPUT=VALUE: {step: {output: value}} for steps stubbed as Succeeded (stubs.py).
    stub_values: dict[str, dict[str, str]] = field(default_factory=dict)
    # --lambda STEP=file.py:function: {step: (file, function)} (lambda_steps.py)
    lambdas: dict[str, tuple[Path, str]] = field(default_factory=dict)
    callback_timeout: float | None = None  # seconds a Callback step waits; None: until answered
    # Steps running at once at most (SageMaker's MaxParallelExecutionSteps); None: its default.
    max_parallel_steps: int | None = None


def _condition_detail(node: StepNode, outcome: bool, account: str) -> str:
    """``0.95 >= 0.9 is true -> if branch``; a condition that skips its only branch says what
    it skipped, by the step's Description (``no BatchInputUri given: batch inference skipped``)."""
    args = node.body.get("Arguments", {})
    if not outcome and not args.get("ElseSteps") and node.body.get("Description"):
        return f"{account}: {node.body['Description']} skipped"
    return f"{account} -> {'if' if outcome else 'else'} branch"


class PipelineRunner(JobSteps):
    def __init__(self, definition: Mapping, pipeline_name: str, options: RunOptions,
                 execution_id: str | None = None):
        self.definition = definition
        self.pipeline_name = pipeline_name
        self.options = options
        self.storage = options.storage
        # Absolute: job processes run with other working directories.
        self.workdir = Path(options.workdir).resolve()
        # Everything that can be refused is refused here, before any job starts.
        self.nodes = interpreter.plan(definition, allow_unsupported=True)
        self.parameters = interpreter.resolve_parameters(definition, options.execution_parameters)
        self.execution_id = execution_id or new_execution_id()
        # Taken (created) when the run starts: ``reserve`` refuses one that exists.
        self.run_dir = self.workdir / "runs" / self.execution_id
        self.registry = Registry(self.workdir / "registry.sqlite")
        # Its jobs' hosts cannot write the registry, the tracking store or the cache (a PID namespace's).
        credentials.protect_workdir(self.workdir)
        self.cache = caching.StepCache(self.workdir / "cache" / pipeline_name)
        self.account = account_of(self._first_request())
        self.execution = {
            "PipelineExecutionId": self.execution_id,
            "PipelineExecutionArn": f"arn:aws:sagemaker:{options.region}:{self.account}:pipeline/"
                                    f"{pipeline_name}/execution/{self.execution_id}",
            "PipelineName": pipeline_name,
            "PipelineArn": f"arn:aws:sagemaker:{options.region}:{self.account}:pipeline/{pipeline_name}",
            "StartDateTime": timestamp(),
            "CurrentDateTime": timestamp(),
        }
        self.ctx = Context(
            parameters=self.parameters, execution=self.execution,
            property_files=interpreter.property_files_of(self.nodes),
            read_json=lambda uri: json.loads(self.storage.read_bytes(uri)),
        )
        self.record = ExecutionRecord(self.execution_id, pipeline_name, str(self.run_dir),
                                      dict(self.parameters))
        self.taken: dict[str, bool] = {}  # condition step -> outcome
        self.started = 0  # steps begun or settled, for their lines' [i/N]
        lambda_steps.check(self.nodes, options.lambdas)
        self.local_steps = set(options.lambdas)  # Lambda steps with a handler run here
        stubs.judge_stored(self.nodes, self.ctx, self.storage)  # @step functions, by what the store holds
        self.stubbed = stubs.check(self.nodes, self.ctx, options.stub_unsupported, options.stub_values,
                                   self.local_steps)
        self.skipped: list[str] = []  # steps --stub-unsupported skip did not run
        # Local runs never ask AWS for prices: the shipped table (or nothing, said so).
        self.prices = PriceBook()

    def _first_request(self) -> dict:
        for node in self.nodes:
            if "RoleArn" in node.body.get("Arguments", {}):
                return node.body["Arguments"]
        return {}

    def say(self, text: str) -> None:
        stream = self.options.stream or sys.stdout
        try:
            stream.write(text + "\n")
            stream.flush()
        except OSError:  # its terminal hung up (EIO): the run goes on, execution.json says it all
            pass

    # --- before anything runs --------------------------------------------------------------
    def preflight(self) -> None:
        """Local paths given to s3:// parameters go into the store; then every location the
        definition reads that is known now must be there (``preflight.py``): malformed or
        missing ones are one error, all listed, before the first job."""
        given = dict(self.parameters)
        placed = preflight.place_local_parameters(self.definition, self.nodes, self.parameters,
                                                  self.storage, self.say)
        self.options.local_sources.update({uri: preflight.local_path_of(given[name])
                                           for name, uri in placed.items()})
        self.record.parameters.update(placed)
        # Stubbed steps (an @step function, EMR, ...) run nothing: their code and inputs are not checked.
        runs = [n for n in self.nodes if not stubs.unsupported(n, self.local_steps)]
        preflight.check(runs, self.ctx, self.storage)
        # How each training job launches (a distribution that cannot run here names itself
        # first), then each job's imports against its image's record: one line, before any step.
        preflight.check_launches(runs, self.ctx, self.storage, partial(check_launch, say=self.say))
        # An SDK v3 @step job's Python holds the client's v3 SDK: made now, as a job is offline.
        sdk_v3_environment.prepare([(n.name, training_kinds.container_arguments(preflight.known_request(n, self.ctx)))
                                    for n in runs if training_kinds.is_function_step(n)], self.say)
        preflight.check_images(runs, self.ctx, self.storage, self.say,
                               code_of=partial(preflight.job_code, v3_code=code_for_image_check),
                               note=before_run.note)
        tuning_step.check(self.nodes, self.ctx)

    # --- the execution ---------------------------------------------------------------------
    def sweep_dead_runners(self) -> None:
        """Executions in this workdir whose runner died (SIGKILL, out of memory) are recorded
        as Failed and what their jobs left running is ended, before this one starts."""
        for doc in recover_dead_runners(self.workdir):
            self.say(f"execution {doc.get('execution_id')} was left Executing by a runner that died: "
                     f"recorded as Failed; {doc['swept_processes']} leftover process(es) of its jobs ended")

    def run(self) -> ExecutionRecord:
        """Run the execution; bad input raises (a UserError) before anything is written."""
        self.preflight()
        reserve(self.run_dir)
        self.sweep_dead_runners()
        # Held until the record is final: a reader that finds it free while the record says
        # Executing knows this process died (execution.load).
        lock = RunnerLock(self.run_dir)
        lock.acquire()
        try:
            return self._execute()
        finally:
            self._track("ended", self.record)
            lock.release()

    def _track(self, event: str, *args) -> None:  # started, step_ended, ended (to MLflow)
        getattr(self.options.tracker, event, lambda *_: None)(*args)

    def _execute(self) -> ExecutionRecord:
        # Private: the definition holds the steps' Environment and hyperparameters.
        write_private(self.run_dir / "definition.json", json.dumps(self.definition, indent=2))
        self.record.save()
        self._track("started", self.record)
        slots = self._slots()
        scheduler = Scheduler(self.nodes, self, max_parallel=self.max_parallel, slots=slots,
                              deferred=interrupts_deferred)
        try:
            failed = scheduler.run()
            if failed is None and self.skipped:  # never Succeeded: SageMaker would have run them
                self.record.finish(STOPPED, stubs.skipped_reason(self.skipped))
            elif failed is None:
                self.record.finish(SUCCEEDED)
            else:  # why: once, on the run's last line
                step = self.record.step(failed.name)
                self.record.finish(step.status if step.status == STOPPED else FAILED,
                                   step.failure_reason if failed.type == STEP_FAIL
                                   else f"step {failed.name} failed: {step.failure_reason}")
        except KeyboardInterrupt:
            # Recording the stop must not be cut short by the next Ctrl-C.
            with interrupts_deferred():
                self._end_executing(STOPPED, stop_reason())
                self.record.finish(STOPPED, stop_reason())
        except Exception as error:
            self._end_executing(FAILED, str(error))
            self.record.finish(FAILED, str(error))
            raise
        return self.record

    @property
    def max_parallel(self) -> int:
        return self.options.max_parallel_steps or scheduler_module.DEFAULT_MAX_PARALLEL_STEPS

    def _slots(self) -> list[list[int]]:
        """Each step that runs beside others gets its share of the cores, divided as a tuning
        job's trials divide them (``cpu_slots``); said once when steps can run side by side."""
        width = min(self.max_parallel, scheduler_module.widest(
            self.nodes, lambda n: self.placement(n) == scheduler_module.SIDE_BY_SIDE))
        if width < 2:
            return []
        cpus = usable_cpus()
        slots = cpu_slots(cpus, width)
        each = sorted({len(s) for s in slots})
        share = f"{each[0]} core(s) each" if len(each) == 1 else "cores split as evenly as they go"
        self.say(f"independent steps run side by side: up to {width} at once "
                 f"(--max-parallel-steps {self.max_parallel}), {share} of this machine's {len(cpus)}")
        return slots

    def _end_executing(self, status: str, reason: str) -> None:
        for step in self.record.steps:
            if step.status == EXECUTING:
                step.status, step.end = status, step.end or timestamp()
                step.failure_reason = step.failure_reason or reason

    # --- the scheduler's questions (dag/scheduler.py) --------------------------------------
    def placement(self, node: StepNode) -> str:
        if node.type in (STEP_PROCESSING, STEP_TRAINING, lambda_steps.STEP_CALLBACK) or \
                node.type == lambda_steps.STEP_LAMBDA and node.name in self.local_steps:
            return scheduler_module.SIDE_BY_SIDE
        if node.type in (tuning_step.STEP_TUNING, inference_steps.STEP_TRANSFORM):
            return scheduler_module.ALONE
        return scheduler_module.QUICK

    def _line(self, node: StepNode, text: str = "") -> None:
        self.started += 1
        self.say(f"==> [{self.started}/{len(self.nodes)}] {node.name} ({node.type}){text}")

    def settle(self, node: StepNode) -> bool:
        """A step that does not run: NotExecuted (its branch not taken, a dependency that did
        not run) or stubbed (--stub-unsupported)."""
        if not self._selected(node):
            current = self.record.add(StepRecord(node.name, node.type, status=NOT_EXECUTED,
                                                 detail=self._why_not(node)))
            self.record.save()
            self._line(node, f": not executed, {current.detail}")
            return True
        if stubs.unsupported(node, self.local_steps) and self._stub_mode(node) is not None:
            current = self.record.add(StepRecord(node.name, node.type))
            self._stub(node, current)
            self._track("step_ended", self.record, current)
            self._line(node, f": {current.status}, {current.detail}")
            return True
        return False

    def begin(self, node: StepNode) -> None:
        self.record.add(StepRecord(node.name, node.type, start=timestamp()))
        self.record.save()
        self._line(node)
        self.execution["CurrentDateTime"] = timestamp()

    def perform(self, node: StepNode, stop) -> bool:
        """The step itself, on the scheduler's thread (``stop`` None) or on one of its own."""
        self._local.stop = stop
        try:
            return self._run_step(node, self.record.step(node.name))
        finally:
            self._local.stop = None

    def conclude(self, node: StepNode, ok: bool, error: BaseException | None) -> None:
        current = self.record.step(node.name)
        if isinstance(error, KeyboardInterrupt):  # stopped on its thread
            current.status, current.failure_reason = STOPPED, current.failure_reason or stop_reason()
        elif error is not None:  # the runner's own error, on a step's thread: that step fails
            current.status, current.failure_reason = FAILED, f"{type(error).__name__}: {error}"
            print("".join(traceback.format_exception(error)), file=sys.stderr, flush=True)
        current.end = current.end or timestamp()
        self.record.save()
        self._track("step_ended", self.record, current)
        if ok:
            self.say(f"==> {node.name}: {current.status}" + (f" ({current.detail})" if current.detail else ""))
        else:  # why: once, on the run's last line
            self.say(f"==> {node.name}: {current.status}")

    def _stub_mode(self, node: StepNode) -> str | None:
        return stubs.mode_for(node, self.options.stub_unsupported, self.options.stub_values)

    def _stub(self, node: StepNode, record: StepRecord) -> None:
        """A step type that does not run locally, as --stub-unsupported / --stub say (stubs.py)."""
        mode, values = self._stub_mode(node), self.options.stub_values.get(node.name)
        record.detail = stubs.detail(node, mode, values)
        if mode == stubs.SKIP:
            record.status = NOT_EXECUTED
            self.skipped.append(node.name)
        else:
            record.start = record.end = timestamp()
            record.status = SUCCEEDED
            record.properties = stubs.properties(node, values)
            self.ctx.properties[node.name] = record.properties
        self.record.save()

    def _selected(self, node: StepNode) -> bool:
        if node.branch is not None:
            condition, outcome = node.branch
            if self.taken.get(condition) != outcome:
                return False
        return all(dep in self.ctx.properties for dep in node.depends_on)

    def _why_not(self, node: StepNode) -> str:
        if node.branch is not None and node.branch[0] in self.taken:
            return f"{node.branch[0]} was {str(self.taken[node.branch[0]]).lower()}"
        return "a step it depends on did not run"

    def _run_step(self, node: StepNode, record: StepRecord) -> bool:
        try:
            if node.type in (STEP_PROCESSING, STEP_TRAINING):
                return self._run_job_step(node, record)
            if node.type == STEP_CONDITION:
                outcome, account = interpreter.evaluate_conditions(
                    node.body["Arguments"].get("Conditions", []), self.ctx)
                self.taken[node.name] = outcome
                record.properties = {"Outcome": outcome}
                record.detail = _condition_detail(node, outcome, account)
                record.status = SUCCEEDED
            elif node.type == STEP_REGISTER_MODEL:
                register_step.register(self, node, record)
            elif node.type == inference_steps.STEP_MODEL:
                inference_steps.create_model(self, node, record)
            elif node.type == inference_steps.STEP_TRANSFORM:
                name = job_name(self.pipeline_name, node.name, self.execution_id, 1)
                inference_steps.run_transform(self, node, record, name)
            elif node.type == tuning_step.STEP_TUNING:
                tuning_step.run_tuning(self, node, record)
            elif node.type == STEP_FAIL:
                message = interpreter.evaluate(node.body.get("Arguments", {}).get("ErrorMessage", ""), self.ctx)
                record.status = FAILED
                record.failure_reason = interpreter.to_string(message)
                return False
            elif node.type == lambda_steps.STEP_LAMBDA and node.name in self.local_steps:
                lambda_steps.run_lambda(self, node, record, self.stop_event())
            elif node.type == lambda_steps.STEP_CALLBACK:
                lambda_steps.run_callback(self, node, record, self.stop_event())
            elif stubs.unsupported(node, self.local_steps):  # decided unreachable before the run, reached anyway
                record.status = FAILED
                record.failure_reason = f"{node.type} steps do not run locally; pass {stubs.FLAG}"
                return False
        except (ExpressionError, StorageError) as error:
            record.status = FAILED
            record.failure_reason = str(error)
            return False
        if record.status == SUCCEEDED:
            self.ctx.properties[node.name] = record.properties
        return record.status == SUCCEEDED
