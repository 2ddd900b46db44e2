"""An ``@step`` function's Training job, run locally (SDK v2 ``sagemaker.workflow.function_step``).

On SageMaker the job's container runs ``job_driver.sh`` from the bootstrap channel: it
``pip install``s the requirements the SDK wrote (always ``sagemaker>=<major.minor>,<next
major>``), then ``python -m sagemaker.remote_function.invoke_function ARGS``, which reads the
pickled function and arguments from ``s3_base_uri`` with the job's own boto3, resolves the
DelayedReturns of earlier steps from their ``results`` in S3, and uploads its own result there.

Here the invoke step runs under the runner's Python, which must be what the pickle needs: the
client's Python minor version (the SDK refuses another) and the requirements already installed
(a job has no internet, so nothing is installed; ``why_not_local`` names what is missing before
any step). Its boto3 talks to moto's S3 server on 127.0.0.1, started for the job and stopped
after it; the objects under ``s3_base_uri`` are copied in before and the changed ones back into
the run's store after, so the store stays the one record of what the job wrote.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pipeline.local.jobs.failures import ALGORITHM_ERROR, CLIENT_ERROR
from pipeline.local.jobs.lifecycle import JobResult, JobStopped
from pipeline.local.store.storage import S3Uri, Storage

DUMMY_KEY = "trainpipe-local"  # moto accepts any credentials; boto3 signs nothing without some
INVOKE = ("import sys\n"
          "from sagemaker.remote_function import errors, invoke_function\n"
          "errors.FAILURE_REASON_PATH = sys.argv[1]\n"
          "invoke_function.main(sys.argv[2:])\n")
SERVER_START_LIMIT = 60.0  # seconds for moto's server to answer (a loaded machine is slow)


# Read again here, not imported from dag/training_kinds.py: jobs and dag stand side by side.
def container_arguments(request) -> list[str]:
    return [str(a) for a in (request.get("AlgorithmSpecification") or {}).get("ContainerArguments") or []]


def option(arguments: list[str], name: str) -> str | None:
    """The value after ``--name`` (invoke_function's argparse)."""
    flag = f"--{name}"
    return arguments[arguments.index(flag) + 1] if flag in arguments[:-1] else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    """moto's S3 server on 127.0.0.1, in a process of its own (moto keeps its state per
    process: two jobs at once must not share it, nor the runner's tests their mocks)."""

    def __init__(self, log: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log.open("ab")
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                         str(self.port)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SERVER_START_LIMIT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"moto's S3 server did not start on {self.url} (see {log})") from None
                time.sleep(0.1)

    def client(self, region: str):
        import boto3

        from pipeline import aws_clients

        # Through the factory: bounded timeouts, retries and deadlines, as every client of ours.
        session = boto3.Session(aws_access_key_id=DUMMY_KEY, aws_secret_access_key=DUMMY_KEY, region_name=region)
        return aws_clients.client(session, "s3", region=region, endpoint_url=self.url)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class FunctionStepJob:
    """The job_steps interface of a training job (``run() -> JobResult``) for an @step function."""

    kind = "Training"

    def __init__(self, request: dict, name: str, storage: Storage, job_dir: Path, *, region: str,
                 echo: bool = False, stream=None, environments=None):
        self.request, self.name, self.storage, self.job_dir = request, name, storage, Path(job_dir)
        self.region, self.echo, self.stream = region, echo, stream
        self.stop_requested = None  # a threading.Event, set by job_steps
        self.failure_file = self.job_dir / "output" / "failure"
        # The account of the job's role, as SageMaker's ARNs name it.
        account = str(request.get("RoleArn") or "").split(":")
        self.arn = f"arn:aws:sagemaker:{region}:{account[4] if len(account) > 4 else '000000000000'}:training-job/{name}"

    def _description(self, status: str, start: float, end: float, reason: str | None) -> dict:
        output = (self.request.get("OutputDataConfig") or {}).get("S3OutputPath", "")
        description = {**self.request, "TrainingJobName": self.name, "TrainingJobStatus": status,
                       "TrainingJobArn": self.arn,
                       "TrainingStartTime": start, "TrainingEndTime": end, "FinalMetricDataList": [],
                       # Not SageMaker's ModelArtifacts (an empty model.tar.gz there): an @step's
                       # output is its return value, which invoke_function uploads here.
                       "FunctionResults": output}
        if reason:
            description["FailureReason"] = reason
        return description

    def _result(self, status, start, reason=None, failure_type=None) -> JobResult:
        end = time.time()
        return JobResult(self.name, self.kind, status, self._description(status, start, end, reason),
                         self.job_dir, self.job_dir / "job.log", start, end, reason, failure_type)

    def run(self) -> JobResult:
        start = time.time()
        self.job_dir.mkdir(parents=True, exist_ok=True)
        # The runner refused before any step what cannot run here (dag/training_kinds.py).
        arguments = container_arguments(self.request)
        base = option(arguments, "s3_base_uri")
        if not base:
            return self._result("Failed", start, "ContainerArguments name no --s3_base_uri", CLIENT_ERROR)
        # SageMaker: what invoke_function reads: its own pickles (<base>/<step>/<func_step_s3_dir>) and
        # the execution's earlier results (<base>/<execution>/<step>/results), where it also writes.
        step, pickled = option(arguments, "pipeline_step_name"), option(arguments, "func_step_s3_dir")
        execution = option(arguments, "pipeline_execution_id")
        # A DelayedReturn of a step the cache answered is read from that earlier execution's
        # results: every S3 location the resolved arguments name (--property_references) goes in too.
        named = [f"{a.rstrip('/')}/" for a in arguments if a.startswith("s3://") and a.rstrip("/") != base.rstrip("/")]
        reads = [f"{base.rstrip('/')}/{step}/{pickled}/", *named, f"{base.rstrip('/')}/{execution}/"] \
            if step and pickled and execution else [base]
        server = S3Server(self.job_dir / "s3-server.log")
        try:
            client = server.client(self.region)
            sent = self._copy_in(client, reads)
            code = self._invoke(server.url, arguments)
            self._copy_back(client, reads[-1], sent)
        finally:
            server.close()
        if code is None:
            raise JobStopped(self._result("Stopped", start, "stopped"))
        if code != 0 or self.failure_file.exists():
            # SageMaker: FailureReason is "AlgorithmError: " and the failure file (the error's repr).
            why = self.failure_file.read_text(errors="replace") if self.failure_file.exists() else self._last_error()
            return self._result("Failed", start, f"AlgorithmError: {why.strip()[:900]}", ALGORITHM_ERROR)
        return self._result("Completed", start)

    def _copy_in(self, client, prefixes: list[str]) -> dict[str, bytes]:
        """The store's objects under ``prefixes`` into the server (the pickles, earlier results)."""
        client.create_bucket(Bucket=S3Uri.parse(prefixes[0]).bucket)
        sent = {}
        for uri in (found for prefix in prefixes for found in self.storage.list(prefix)):
            data = self.storage.read_bytes(uri)
            root = S3Uri.parse(uri)
            key = root.key
            client.put_object(Bucket=root.bucket, Key=key, Body=data)
            sent[key] = data
        return sent

    def _copy_back(self, client, base: str, sent: dict[str, bytes]) -> None:
        root = S3Uri.parse(base)
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=root.bucket, Prefix=root.key):
            for item in page.get("Contents", []):
                data = client.get_object(Bucket=root.bucket, Key=item["Key"])["Body"].read()
                if sent.get(item["Key"]) != data:
                    self.storage.put_bytes(data, f"s3://{root.bucket}/{item['Key']}")

    def _environment(self, url: str) -> dict[str, str]:
        environment = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        environment.update({str(k): str(v) for k, v in (self.request.get("Environment") or {}).items()})
        environment.update({
            "AWS_ENDPOINT_URL": url,  # boto3 >= 1.28 sends every client there (the job's S3 and nothing else)
            "AWS_ACCESS_KEY_ID": DUMMY_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_KEY,
            "AWS_DEFAULT_REGION": self.region,
            # SageMaker: the training job's variables job_driver.sh and the SDK read.
            "TRAINING_JOB_NAME": self.name,
            "TRAINING_JOB_ARN": self.arn,
        })
        return environment

    def _invoke(self, url: str, arguments: list[str]) -> int | None:
        """invoke_function's exit code; None when the job was stopped."""
        log = self.job_dir / "job.log"
        # SageMaker: job_driver.sh's last line, ``python -m sagemaker.remote_function.invoke_function "$@"``,
        # with the failure file (the container's /opt/ml/output/failure) in the job's folder: where
        # it cannot be written, handle_error raises inside main's finally, which exits 0.
        command = [sys.executable, "-c", INVOKE, str(self.failure_file), *arguments]
        self.failure_file.parent.mkdir(parents=True, exist_ok=True)
        workdir = self.job_dir / "workdir"
        workdir.mkdir(exist_ok=True)
        with log.open("wb") as out:
            process = subprocess.Popen(command, cwd=workdir, env=self._environment(url), stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            try:
                while process.poll() is None:
                    if self.stop_requested is not None and self.stop_requested.wait(0.2):
                        self._end(process)
                        return None
                    if self.stop_requested is None:
                        time.sleep(0.2)
            except BaseException:  # Ctrl-C on the scheduler's thread: its own session did not see it
                self._end(process)
                raise
        if self.echo:
            text = log.read_text(errors="replace")
            (self.stream or sys.stdout).write("".join(f"[algo-1] {line}\n" for line in text.splitlines()))
        return process.returncode

    @staticmethod
    def _end(process: subprocess.Popen) -> None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _last_error(self) -> str:
        """The function's exception: the last line of the log that names one."""
        lines = (self.job_dir / "job.log").read_text(errors="replace").splitlines()
        errors = [line for line in lines if "Error" in line or "Exception" in line]
        return (errors or lines or ["invoke_function failed with no output"])[-1].strip()[:900]
