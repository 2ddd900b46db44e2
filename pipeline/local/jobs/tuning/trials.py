"""A tuning job's trial: a training job of the same runner that the tuning job can stop
between two polls, retried where it failed on the runner's side (``RetryStrategy``), and
summarised as ListTrainingJobsForHyperParameterTuningJob shows it.

A trial the tuning job stops (early stopping, a completion criterion) keeps its model, as
SageMaker uploads ``/opt/ml/model`` of a stopped training job: whatever the script saved there,
before or in the grace period after SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from pipeline.local.hosts import tf_tasks
from pipeline.local.hosts.scripts import script_pids
from pipeline.local.jobs import stopped as stopped_job
from pipeline.local.jobs.failures import INTERNAL_ERROR
from pipeline.local.jobs.lifecycle import JobResult, JobStopped, arn
from pipeline.local.jobs.logs import now_iso
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr

# SageMaker: StopTrainingJob "sends the algorithm the SIGTERM signal, which delays job
# termination for 120 seconds" (API StopTrainingJob).
STOP_GRACE_SECONDS = 120.0


class EarlyStop(KeyboardInterrupt):
    """Raised in a trial's job loop when the tuning job stops it: the job ends Stopped, with
    ``reason`` as its reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TrialJob(TrainingJob):
    """A training job the tuning job can stop between two polls."""

    def __init__(self, *args, stop_event: threading.Event, **kwargs):
        super().__init__(*args, **kwargs)
        self.stop_event = stop_event
        self.stop_reason = "stopped by the tuning job"  # said before the event is set

    def poll_hook(self) -> None:
        super().poll_hook()
        # SageMaker stops a running job only: one whose processes have all ended goes on to
        # finish (its model is packed and kept).
        if self.stop_event.is_set() and self._scripts_running():
            self.grace_period()
            raise EarlyStop(self.stop_reason)

    def grace_period(self) -> None:
        """SageMaker: a stopped job's script gets SIGTERM, then up to STOP_GRACE_SECONDS to
        save its model before the job's processes are killed. The scripts (ranks) get it, not
        mpirun: Open MPI's mpirun aborts on SIGTERM and kills its ranks a second later
        (odls_base_sigkill_timeout). Returns once every process has ended or the time is up;
        a Ctrl-C of the run cuts it short."""
        for pid in script_pids(self.processes.token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        # ParameterServer: the servers serve until the job ends (they never end by themselves).
        while self._scripts_running() and time.monotonic() < deadline:
            if self.stop_requested is not None and self.stop_requested.is_set():
                return
            time.sleep(0.1)

    def _scripts_running(self) -> bool:
        return any(not c.label.endswith(tf_tasks.PS_SUFFIX) for c in self.processes.running())


@dataclass
class Trial:
    number: int  # 1-based, as in the name
    name: str
    values: dict[str, str]
    study_trial: object
    cpus: list[int]
    job: TrialJob
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    result: JobResult | None = None
    error: str | None = None
    created: float = field(default_factory=time.time)
    reported: int = 0  # objective values reported to the study (epochs)
    last_value: float | None = None
    stop_reason: str | None = None  # why the tuning job stopped it
    verdict_epoch: int | None = None  # the epoch early stopping judged it at (it may run on until the stop lands)
    kept_model: bool = False  # stopped by the tuning job: whether its script had saved a model to keep
    attempts: int = 1  # SageMaker: RetryStrategy runs a job again under the same name

    def run(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # not Linux: the trial shares every core
            os.sched_setaffinity(0, set(self.cpus))  # this thread: the job's processes inherit it
        try:
            self.result = self.job.run()
        except JobStopped as stopped:
            self.result = stopped.result
            if self.stop_reason is not None:  # stopped by the tuning job, not by Ctrl-C
                self.kept_model = stopped_job.keep_model(self.job, self.result)
        except BaseException as error:  # noqa: BLE001 - the trial's end, said in its summary
            self.error = f"InternalServerError: {type(error).__name__}: {error}"

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"trial-{self.name}", daemon=True)
        self.thread.start()

    @property
    def status(self) -> str:
        if self.result is None:
            return "Failed"
        return self.result.status

    @property
    def internal_failure(self) -> bool:
        """Failed on the runner's side (SageMaker's InternalServerError), the one failure
        RetryStrategy retries; the script's own failures are not."""
        if self.error is not None:  # the runner's own exception; not a trial without its metric
            return self.error.startswith("InternalServerError")
        return self.status == "Failed" and self.result.failure_type == INTERNAL_ERROR

    def summary(self, tuning_name: str, request: hr.TuningRequest, region: str, account: str) -> dict:
        """SageMaker: a HyperParameterTrainingJobSummary."""
        doc = {
            "TrainingJobName": self.name,
            "TrainingJobArn": arn(region, account, "training-job", self.name),
            "TuningJobName": tuning_name,
            "CreationTime": now_iso(self.created),
            "TrainingJobStatus": self.status,
            "TunedHyperParameters": dict(self.values),
            "ObjectiveStatus": "Succeeded" if self.last_value is not None else "Failed",
        }
        if self.result is not None:
            doc["TrainingStartTime"] = now_iso(self.result.start)
            doc["TrainingEndTime"] = now_iso(self.result.end)
        if self.last_value is not None:
            doc["FinalHyperParameterTuningJobObjectiveMetric"] = {
                "Type": request.objective_type, "MetricName": request.objective_metric, "Value": self.last_value}
        reason = self.stop_reason or self.error or (self.result.failure_reason if self.result else None)
        if reason and self.status != "Completed":
            doc["FailureReason"] = reason
        return doc
