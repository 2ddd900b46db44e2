"""Run a pipeline definition on this machine: one execution, step after step.

The runner knows SageMaker's step types, not trainpipe's steps: it takes the definition JSON
(the very document ``trainpipe definition`` prints and SageMaker would be given), orders the
steps by their data dependencies (``interpreter.plan``), evaluates each step's arguments
against the parameters and the properties of the steps before it, and then:

- Processing / Training: runs the job request locally (``processing_job.py``,
  ``training_job.py``), with the step's ``CacheConfig`` (``caching.py``) and
  ``RetryPolicies`` honoured;
- Tuning: a hyperparameter tuning job (``tuning_step.py``), its trials training jobs run side
  by side on their share of the cores;
- Condition: evaluates the conditions, and the branch not taken is NotExecuted;
- RegisterModel: adds a model package to the local registry (``register_step.py``);
- Fail: ends the execution as Failed with the step's ErrorMessage.

Steps run one at a time (SageMaker would run independent steps in parallel; this DAG is a
chain). The first failed step fails the execution; nothing after it starts.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pipeline.costs import accounting
from pipeline.costs.prices import PriceBook
from pipeline.errors import UserError
from pipeline.local import inference_steps, register_step, tuning_step
from pipeline.local.dag import caching, interpreter, preflight, stubs
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
from pipeline.local.hosts import namespaces
from pipeline.local.hosts.processes import interrupts_deferred, stop_reason
from pipeline.local.jobs.failures import CLIENT_ERROR, in_user_paths
from pipeline.local.jobs.lifecycle import ENVIRONMENTS as JOB_ENVIRONMENTS
from pipeline.local.jobs.lifecycle import JobResult, JobStopped, account_of
from pipeline.local.jobs.processing import ProcessingJob
from pipeline.local.jobs.v3.sdk_v3 import check_launch, code_for_image_check
from pipeline.local.jobs.v3.training_v3 import job_class
from pipeline.local.store.private import write_private
from pipeline.local.store.registry import Registry
from pipeline.local.store.storage import Storage, StorageError

JOB_NAME_LIMIT = 63  # SageMaker: job names are at most 63 characters


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


def job_name(pipeline: str, step: str, execution_id: str, attempt: int) -> str:
    suffix = f"-{execution_id}" + (f"-{attempt}" if attempt > 1 else "")
    return f"{pipeline}-{step}"[: JOB_NAME_LIMIT - len(suffix)] + suffix


def _condition_detail(node: StepNode, outcome: bool, account: str) -> str:
    """``0.95 >= 0.9 is true -> if branch``; a condition that skips its only branch says what
    it skipped, by the step's Description (``no BatchInputUri given: batch inference skipped``)."""
    args = node.body.get("Arguments", {})
    if not outcome and not args.get("ElseSteps") and node.body.get("Description"):
        return f"{account}: {node.body['Description']} skipped"
    return f"{account} -> {'if' if outcome else 'else'} branch"


def matching_policy(policies: list[dict], failure_type: str | None) -> int | None:
    """Index of the first retry policy whose ExceptionType covers ``failure_type``."""
    for index, policy in enumerate(policies):
        if failure_type and failure_type in policy.get("ExceptionType", []):
            return index
    return None


class PipelineRunner:
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
        self.stubbed = stubs.check(self.nodes, self.ctx, options.stub_unsupported)
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
        preflight.check(self.nodes, self.ctx, self.storage)
        # Each job's imports against its image's record: one line, before any step runs.
        preflight.check_images(self.nodes, self.ctx, self.storage, self.say,
                               code_of=partial(preflight.job_code, v3_code=code_for_image_check))
        preflight.check_launches(self.nodes, self.ctx, self.storage, partial(check_launch, say=self.say))
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
        current: StepRecord | None = None
        runnable = self.nodes
        try:
            for index, node in enumerate(runnable, 1):
                current = StepRecord(node.name, node.type)
                self.record.steps.append(current)
                if not self._selected(node):
                    current.status = NOT_EXECUTED
                    current.detail = self._why_not(node)
                    self.record.save()
                    self.say(f"==> [{index}/{len(runnable)}] {node.name} ({node.type}): "
                             f"not executed, {current.detail}")
                    continue
                if stubs.unsupported(node) and self.options.stub_unsupported is not None:
                    self._stub(node, current)
                    self._track("step_ended", self.record, current)
                    self.say(f"==> [{index}/{len(runnable)}] {node.name} ({node.type}): "
                             f"{current.status}, {current.detail}")
                    continue
                current.start = timestamp()
                self.record.save()
                self.say(f"==> [{index}/{len(runnable)}] {node.name} ({node.type})")
                self.execution["CurrentDateTime"] = timestamp()
                ok = self._run_step(node, current)
                current.end = current.end or timestamp()
                self.record.save()
                self._track("step_ended", self.record, current)
                if ok:
                    self.say(f"==> {node.name}: {current.status}"
                             + (f" ({current.detail})" if current.detail else ""))
                else:  # why: once, on the run's last line
                    self.say(f"==> {node.name}: {current.status}")
                    self.record.finish(current.status if current.status == STOPPED else FAILED,
                                       current.failure_reason if node.type == STEP_FAIL
                                       else f"step {node.name} failed: {current.failure_reason}")
                    return self.record
            self.record.finish(SUCCEEDED)
        except KeyboardInterrupt:
            # Recording the stop must not be cut short by the next Ctrl-C.
            with interrupts_deferred():
                if current is not None and current.status == EXECUTING:
                    current.status = STOPPED
                    current.end = timestamp()
                    current.failure_reason = current.failure_reason or stop_reason()
                self.record.finish(STOPPED, stop_reason())
        except Exception as error:
            if current is not None and current.status == EXECUTING:
                current.status = FAILED
                current.end = timestamp()
                current.failure_reason = str(error)
            self.record.finish(FAILED, str(error))
            raise
        return self.record

    def _stub(self, node: StepNode, record: StepRecord) -> None:
        """A step type that does not run locally, as --stub-unsupported says (stubs.py)."""
        mode = self.options.stub_unsupported
        record.detail = stubs.detail(node, mode)
        if mode == stubs.SKIP:
            record.status = NOT_EXECUTED
        else:
            record.start = record.end = timestamp()
            record.status = SUCCEEDED
            record.properties = stubs.properties(node)
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
            elif stubs.unsupported(node):  # decided unreachable before the run, reached anyway
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

    # --- jobs, cache and retries --------------------------------------------------------------
    def _cache_key(self, node: StepNode) -> tuple[str, dict] | None:
        config = node.body.get("CacheConfig") or {}
        if not (self.options.use_cache and config.get("Enabled")):
            return None
        symbolic = Context(
            parameters=self.parameters,
            execution={name: f"{{Execution.{name}}}" for name in interpreter.EXECUTION_VARIABLES},
            properties=self.ctx.properties, property_files=self.ctx.property_files,
            read_json=self.ctx.read_json)
        attributes = interpreter.evaluate(node.body.get("Arguments", {}), symbolic)
        material = caching.key_material(self.pipeline_name, node.name, node.type, attributes)
        return caching.cache_key(material), material

    def _cached(self, node: StepNode, key: str) -> caching.CacheEntry | None:
        entry = self.cache.lookup(key, node.body["CacheConfig"].get("ExpireAfter", "P30D"))
        if entry is None:
            return None
        missing = [u for u in caching.output_uris(node.type, entry.properties) if not self.storage.list(u)]
        if missing:
            self.say(f"    cache entry from {entry.execution_id} is unusable: "
                     f"{', '.join(missing)} no longer exist(s); running the step")
            return None
        return entry

    def _run_job_step(self, node: StepNode, record: StepRecord) -> bool:
        request = interpreter.evaluate(node.body.get("Arguments", {}), self.ctx)
        keyed = self._cache_key(node)
        if keyed is not None:
            entry = self._cached(node, keyed[0])
            if entry is not None:
                record.status = SUCCEEDED
                record.properties = entry.properties
                record.cache_hit = {"execution_id": entry.execution_id, "key": keyed[0][:16]}
                record.job_name = entry.properties.get("TrainingJobName") or entry.properties.get("ProcessingJobName")
                record.metrics = {m["MetricName"]: m["Value"]
                                  for m in entry.properties.get("FinalMetricDataList", [])}
                record.detail = f"cache hit: reused {record.job_name} from execution {entry.execution_id}"
                self.ctx.properties[node.name] = entry.properties
                return True
        meter = accounting.LocalMeter()
        try:
            result = self._run_with_retries(node, request, record)
        except KeyboardInterrupt as stop:
            # A stopped job held its instances until the stop: the cost table still lists it.
            described = stop.result.description if isinstance(stop, JobStopped) else {
                **request, f"{node.type}JobName": record.job_name}
            with interrupts_deferred():
                record.cost = accounting.stopped_local_job(self._cost(node, described, meter),
                                                           stop_reason())
            raise
        record.cost = self._cost(node, result.description, meter)
        record.properties = result.description
        record.metrics = {m["MetricName"]: m["Value"] for m in result.description.get("FinalMetricDataList", [])}
        if result.status == "Completed":
            record.status = SUCCEEDED
            if node.type == STEP_TRAINING:
                record.detail = "model " + self._with_file(result.description["ModelArtifacts"]["S3ModelArtifacts"])
            elif node.type == STEP_PROCESSING:
                record.detail = self._reports(result.description) or record.detail
            if result.warnings:  # Completed, but not as it should be (an empty model)
                record.detail = "; ".join(filter(None, [record.detail, *(f"warning: {w}" for w in result.warnings)]))
            if keyed is not None:
                self.cache.store(keyed[0], node.name, self.execution_id, result.description, keyed[1])
            self.ctx.properties[node.name] = result.description
            return True
        record.status = FAILED
        # The step's FailureReason (its properties) stays SageMaker's; the record's names the
        # user's input files where the job named their container copies.
        record.failure_reason = result.failure_reason and in_user_paths(
            result.failure_reason, result.description, self.storage, self.options.local_sources, result.job_dir,
            container=namespaces.unavailable_reason() is None)
        return False

    def _cost(self, node: StepNode, description: dict, meter: accounting.LocalMeter) -> dict:
        """Every attempt's time counts: each one held the instances."""
        wall, cpu, joules = meter.stop()
        kind = "Training" if node.type == STEP_TRAINING else "Processing"
        try:
            return accounting.local_job_cost(description, kind, self.options.region, self.prices,
                                             wall, cpu, joules)
        except UserError as error:  # a factor we lack: the run still stands
            return {"job": description.get(f"{kind}JobName"), "kind": kind, "notes": [str(error)]}

    def _with_file(self, uri: str) -> str:
        """``uri (its file)`` where the store is on this machine (the summary's links)."""
        path = self.storage.local_path(uri)
        return f"{uri} ({path})" if path else uri

    def _reports(self, description: dict) -> str | None:
        """A processing job's evaluation.json, beside its file, for the summary."""
        from evaluation.report import REPORT_FILE
        from pipeline.local.store.storage import join_uri

        outputs = description.get("ProcessingOutputConfig", {}).get("Outputs", [])
        uris = [join_uri(o["S3Output"]["S3Uri"], REPORT_FILE) for o in outputs if o.get("S3Output", {}).get("S3Uri")]
        found = [self._with_file(uri) for uri in uris if self.storage.local_path(uri)]
        return "; ".join(f"{REPORT_FILE} {f}" for f in found) or None

    def _run_with_retries(self, node: StepNode, request: dict, record: StepRecord) -> JobResult:
        policies = list(node.body.get("RetryPolicies") or [])
        retries: dict[int, int] = {}
        first_start = time.time()
        kind = job_class(request) if node.type == STEP_TRAINING else ProcessingJob
        while True:
            record.attempts += 1
            name = job_name(self.pipeline_name, node.name, self.execution_id, record.attempts)
            record.job_name = name
            record.job_dir = str(self.run_dir / "jobs" / name)
            self.record.save()
            try:
                job = kind(request, name, self.storage, Path(record.job_dir),
                                region=self.options.region, echo=self.options.echo,
                                stream=self.options.stream,
                                environments=self.workdir / JOB_ENVIRONMENTS)
                result = job.run()
            except JobStopped as stopped:
                record.properties = stopped.result.description
                raise
            if result.status == "Completed":
                return result
            index = matching_policy(policies, result.failure_type)
            if index is None:
                if result.failure_type not in (None, CLIENT_ERROR) and policies:
                    self.say(f"    {result.failure_type}: no retry policy of {node.name} covers it")
                return result
            policy = policies[index]
            done = retries.get(index, 0)
            # SageMaker: MaxAttempts counts retries; ExpireAfterMin bounds the time retrying.
            if policy.get("MaxAttempts") is not None and done >= int(policy["MaxAttempts"]):
                self.say(f"    {result.failure_type}: retry policy exhausted after {done} retries")
                return result
            if policy.get("ExpireAfterMin") is not None and \
                    time.time() - first_start > 60 * float(policy["ExpireAfterMin"]):
                self.say(f"    {result.failure_type}: retry policy expired")
                return result
            delay = float(policy.get("IntervalSeconds", 1)) * float(policy.get("BackoffRate", 2.0)) ** done
            retries[index] = done + 1
            self.say(f"    {result.failure_type}: {result.failure_reason}")
            self.say(f"    retrying {node.name} in {delay:g}s (retry {done + 1}"
                     + (f" of {policy['MaxAttempts']}" if policy.get("MaxAttempts") else "") + ")")
            self.options.sleep(delay)
