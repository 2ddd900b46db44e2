"""The runner's Processing and Training steps: a job request run locally, with the step's
``CacheConfig`` (``dag/caching.py``) and ``RetryPolicies`` honoured, and its cost measured.

``JobSteps`` is a part of ``PipelineRunner`` (``runner.py``), apart so that each stays readable.
A job step may run on a thread of its own while other steps run (``dag/scheduler.py``): the
thread's stop event reaches the job (``LocalJob.stop_requested``); the job knows nothing else of
its siblings.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from pipeline.costs import accounting
from pipeline.errors import UserError
from pipeline.local.dag import caching, interpreter, training_kinds
from pipeline.local.dag.interpreter import STEP_PROCESSING, STEP_TRAINING, Context, StepNode
from pipeline.local.execution import FAILED, SUCCEEDED, StepRecord
from pipeline.local.hosts import namespaces
from pipeline.local.hosts.processes import interrupts_deferred, stop_reason
from pipeline.local.jobs import stopped as stopped_job
from pipeline.local.jobs.builtin_xgboost import BuiltinXGBoostJob
from pipeline.local.jobs.failures import CLIENT_ERROR, in_user_paths
from pipeline.local.jobs.function_step import FunctionStepJob
from pipeline.local.jobs.lifecycle import ENVIRONMENTS as JOB_ENVIRONMENTS
from pipeline.local.jobs.lifecycle import JobResult, JobStopped
from pipeline.local.jobs.processing import ProcessingJob
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.jobs.v3.training_v3 import job_class

JOB_NAME_LIMIT = 63  # SageMaker: job names are at most 63 characters


def job_name(pipeline: str, step: str, execution_id: str, attempt: int) -> str:
    suffix = f"-{execution_id}" + (f"-{attempt}" if attempt > 1 else "")
    return f"{pipeline}-{step}"[: JOB_NAME_LIMIT - len(suffix)] + suffix


def matching_policy(policies: list[dict], failure_type: str | None) -> int | None:
    """Index of the first retry policy whose ExceptionType covers ``failure_type``."""
    for index, policy in enumerate(policies):
        if failure_type and failure_type in policy.get("ExceptionType", []):
            return index
    return None


class StepStream:
    """The terminal for a job whose step runs beside others: each of its lines begins with the
    step's name, so that two jobs' ``[algo-1] ...`` lines can be told apart."""

    def __init__(self, stream, step: str):
        self.stream = stream
        self.prefix = f"{step} | "

    def write(self, text: str) -> None:
        target = self.stream or sys.stdout
        target.write("".join(self.prefix + line for line in text.splitlines(keepends=True)))

    def flush(self) -> None:
        (self.stream or sys.stdout).flush()


class JobSteps:
    # The stop event of the step running on this thread (None on the scheduler's own thread).
    _local = threading.local()

    def stop_event(self) -> threading.Event | None:
        return getattr(self._local, "stop", None)

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
            if "FunctionResults" in result.description:  # an @step (jobs/function_step.py)
                record.detail = "returned " + result.description["FunctionResults"]
            elif node.type == STEP_TRAINING:
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
        kind = ProcessingJob if node.type != STEP_TRAINING else \
            FunctionStepJob if training_kinds.is_function_step(node) else \
            BuiltinXGBoostJob if training_kinds.builtin_algorithm(node) else job_class(request)
        while True:
            record.attempts += 1
            name = job_name(self.pipeline_name, node.name, self.execution_id, record.attempts)
            record.job_name = name
            record.job_dir = str(self.run_dir / "jobs" / name)
            self.record.save()
            try:
                job = kind(request, name, self.storage, Path(record.job_dir),
                           region=self.options.region, echo=self.options.echo,
                           stream=self.options.stream if self.stop_event() is None
                           else StepStream(self.options.stream, node.name),
                           environments=self.workdir / JOB_ENVIRONMENTS)
                job.stop_requested = self.stop_event()
                result = job.run()
            except JobStopped as stopped:
                # SageMaker: a stopped training job's model is uploaded; here where its scripts
                # ended by themselves in their grace (a model cut off mid-save is no model).
                if isinstance(job, TrainingJob) and job.scripts_ended:
                    with interrupts_deferred():
                        if stopped_job.keep_model(job, stopped.result):
                            self.say(f"    {node.name}: the stopped job's model: {job.model_uri}")
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
            stop = self.stop_event()
            if stop is None:
                self.options.sleep(delay)
            elif stop.wait(delay):  # stopped while it waited to retry
                raise JobStopped(result)
