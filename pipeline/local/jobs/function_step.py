"""An ``@step`` function's Training job, run locally (SDK v2 ``sagemaker.workflow.function_step``;
SDK v3 ``sagemaker.mlops.workflow.function_step``, whose job runs ``sagemaker.core.remote_function``
in the v3 SDK's environment, ``environments/sdk_v3_environment.py``, and whose results lie under the
step's own folder, ``<s3_base_uri>/<step>/<func_step_s3_dir>/<execution>/results``).

SageMaker runs the job's ContainerEntrypoint, ``/bin/bash /opt/ml/input/data/
sagemaker_remote_function_bootstrap/job_driver.sh``, with its ContainerArguments: the driver
the SDK uploaded runs ``bootstrap_runtime_environment.py`` (it unpacks ``workspace.zip`` from the
channel named after the pipeline's build time into the working folder, copies the dependencies
channel's files there, runs ``pre_exec.sh`` and ``pip install -r <dependency file> -U``, and
writes ``/opt/ml/input/sm_training.env``), then ``cd sagemaker_remote_function_workspace`` and
``python -m sagemaker.remote_function.invoke_function ARGS``, which reads the pickled function and
arguments from ``s3_base_uri`` with the job's own boto3, resolves the DelayedReturns of earlier
steps from their ``results`` in S3, and uploads its own result there.

Here ``FunctionStepJob`` is a ``TrainingJob`` (``training.py``): its channels staged under each
host's ``/opt/ml/input/data``, ``/opt/ml/input/config`` written, the request's Environment and the
training job's variables set, and the entrypoint run as the host, in its namespaces, with
``python`` a job environment's (the runner's interpreter: the pickle needs the client's minor
version, and the runner's sagemaker meets the requirement line the SDK always writes). A job has
no internet: pip answers from what is installed (``PIP_NO_INDEX``), and ``why_not_local``
(``dag/training_kinds.py``) refused unmet requirements before any step. Its boto3 talks to moto's
S3 server on 127.0.0.1 (``AWS_ENDPOINT_URL``), started for the job and stopped after it; the
objects invoke_function reads are copied in before and the changed ones back into the run's
store after, so the store stays the one record of what the job wrote.

Where this machine gives no job a private ``/opt/ml`` (``hosts/namespaces.py``), the driver's
fixed ``/opt/ml`` paths cannot be the job's: invoke_function then runs directly under the runner's
Python (``DirectInvokeJob``), without the bootstrap, and the job's log says so.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from evaluation.report import MODEL_ARCHIVE
from pipeline.local.hosts import namespaces
from pipeline.local.jobs.environments import environment as job_environment
from pipeline.local.jobs.environments import sdk_v3_environment
from pipeline.local.jobs.failures import ALGORITHM_ERROR, CLIENT_ERROR, JobFailure
from pipeline.local.jobs.lifecycle import JobResult, JobStopped, base_environment
from pipeline.local.jobs.packing import pack_directory
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.store.private import private_dir
from pipeline.local.store.storage import S3Uri, Storage

DUMMY_KEY = "trainpipe-local"  # moto accepts any credentials; boto3 signs nothing without some
# SageMaker: job_driver.sh's invoke_function, v2's (sagemaker.remote_function) or v3's
# (sagemaker.core.remote_function, sagemaker-core), with the failure file in the job's folder.
INVOKE = ("import sys\n"
          "from {package} import errors, invoke_function\n"
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
        # Started with what every job gets, not the runner's secrets: where jobs get no PID
        # namespace, they read the environment of this process of their user.
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                         str(self.port)], stdout=self.log, stderr=subprocess.STDOUT,
                                        env=base_environment(dict(os.environ)))
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


def reads(arguments: list[str], base: str) -> list[str]:
    """The S3 prefixes invoke_function reads, the execution's own last (where it also writes)."""
    # SageMaker: what invoke_function reads: its own pickles (<base>/<step>/<func_step_s3_dir>) and
    # the execution's earlier results (<base>/<execution>/<step>/results), where it also writes.
    step, pickled = option(arguments, "pipeline_step_name"), option(arguments, "func_step_s3_dir")
    execution = option(arguments, "pipeline_execution_id")
    # A DelayedReturn of a step the cache answered is read from that earlier execution's
    # results: every S3 location the resolved arguments name (--property_references) goes in too.
    named = [f"{a.rstrip('/')}/" for a in arguments if a.startswith("s3://") and a.rstrip("/") != base.rstrip("/")]
    return [f"{base.rstrip('/')}/{step}/{pickled}/", *named, f"{base.rstrip('/')}/{execution}/"] \
        if step and pickled and execution else [base]


def copy_in(storage: Storage, client, prefixes: list[str]) -> dict[str, bytes]:
    """The store's objects under ``prefixes`` into the server (the pickles, earlier results)."""
    client.create_bucket(Bucket=S3Uri.parse(prefixes[0]).bucket)
    sent = {}
    for uri in (found for prefix in prefixes for found in storage.list(prefix)):
        data = storage.read_bytes(uri)
        root = S3Uri.parse(uri)
        client.put_object(Bucket=root.bucket, Key=root.key, Body=data)
        sent[root.key] = data
    return sent


def copy_back(storage: Storage, client, prefixes: list[str], sent: dict[str, bytes]) -> None:
    """What the job wrote (its results, its exception) into the run's store: under the
    execution's folder (v2's results, either SDK's exception) and the step's own (v3's results,
    ``<base>/<step>/<func_step_s3_dir>/<execution>/results``)."""
    for base in dict.fromkeys([prefixes[0], prefixes[-1]]):
        root = S3Uri.parse(base)
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=root.bucket, Prefix=root.key):
            for item in page.get("Contents", []):
                data = client.get_object(Bucket=root.bucket, Key=item["Key"])["Body"].read()
                if sent.get(item["Key"]) != data:
                    storage.put_bytes(data, f"s3://{root.bucket}/{item['Key']}")


def s3_variables(url: str, region: str) -> dict[str, str]:
    """What sends the job's boto3 to moto's server, with credentials moto accepts."""
    return {"AWS_ENDPOINT_URL": url,  # boto3 >= 1.28 sends every client there (the job's S3 and nothing else)
            "AWS_ACCESS_KEY_ID": DUMMY_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_KEY, "AWS_DEFAULT_REGION": region}


class FunctionStepJob:
    """The job that runs an @step function: job_driver.sh as SageMaker runs it (``DriverJob``),
    or where no job gets a private /opt/ml here, invoke_function directly (``DirectInvokeJob``)."""

    def __new__(cls, *args, **kwargs):
        kind = DriverJob if namespaces.unavailable_reason() is None else DirectInvokeJob
        return kind(*args, **kwargs)


class DirectInvokeJob:
    """The job_steps interface of a training job (``run() -> JobResult``) for an @step function
    run without job_driver.sh: no private /opt/ml, so no bootstrap."""

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
        prefixes = reads(arguments, base)
        # One line, first in the job's log: this job skips the bootstrap SageMaker runs.
        python = "SDK v3 environment's Python" if sdk_v3_environment.client_sdk(arguments) else "runner's Python"
        with (self.job_dir / "job.log").open("a") as log:
            log.write(f"[{self.name}] no private {namespaces.CONTAINER_BASE} here "
                      f"({namespaces.unavailable_reason()}): invoke_function runs directly under the "
                      f"{python}, without job_driver.sh (no workspace, no dependencies channel)\n")
        server = S3Server(self.job_dir / "s3-server.log")
        try:
            client = server.client(self.region)
            sent = copy_in(self.storage, client, prefixes)
            code = self._invoke(server.url, arguments)
            copy_back(self.storage, client, prefixes, sent)
        finally:
            server.close()
        if code is None:
            raise JobStopped(self._result("Stopped", start, "stopped"))
        if code != 0 or self.failure_file.exists():
            # SageMaker: FailureReason is "AlgorithmError: " and the failure file (the error's repr).
            why = self.failure_file.read_text(errors="replace") if self.failure_file.exists() else self._last_error()
            return self._result("Failed", start, f"AlgorithmError: {why.strip()[:900]}", ALGORITHM_ERROR)
        return self._result("Completed", start)

    def _environment(self, url: str) -> dict[str, str]:
        # What every job starts from (no credential, a HOME of its own), not the runner's whole
        # environment: MLFLOW_TRACKING_TOKEN, GITHUB_TOKEN, ... reached the function. PYTHONPATH
        # too: run directly, invoke_function finds the user's modules by the runner's.
        environment = base_environment(dict(os.environ), home=private_dir(self.job_dir / "home"))
        if os.environ.get("PYTHONPATH"):
            environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
        environment.update({str(k): str(v) for k, v in (self.request.get("Environment") or {}).items()})
        environment.update(s3_variables(url, self.region))
        environment.update({
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
        sdk = sdk_v3_environment.client_sdk(arguments)
        if sdk:  # the SDK v3's environment (made before any step): v3's invoke_function
            made = sdk_v3_environment.interpreter(sdk, option(arguments, "client_python_version") or "")
            python, package = str(made.seed / "bin" / "python"), "sagemaker.core.remote_function"
        else:
            python, package = sys.executable, "sagemaker.remote_function"
        command = [python, "-c", INVOKE.format(package=package), str(self.failure_file), *arguments]
        self.failure_file.parent.mkdir(parents=True, exist_ok=True)
        workdir = self.job_dir / "workdir"
        workdir.mkdir(exist_ok=True)
        with log.open("ab") as out:
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


class DriverJob(TrainingJob):
    """An @step function's job as SageMaker runs it: the request's ContainerEntrypoint
    (job_driver.sh from the bootstrap channel) with its ContainerArguments, on every host."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.arguments = container_arguments(self.request)
        self.server: S3Server | None = None
        self.client = None
        self.sent: dict[str, bytes] = {}
        self.prefixes: list[str] = []

    def check_launch(self) -> None:
        specification = self.request.get("AlgorithmSpecification") or {}
        if not specification.get("ContainerEntrypoint"):
            raise JobFailure(f"training job {self.name}: an @step job with no ContainerEntrypoint; "
                             f"keep the AlgorithmSpecification the SDK's @step builds", CLIENT_ERROR)
        base = option(self.arguments, "s3_base_uri")
        if not base:
            raise JobFailure(f"training job {self.name}: ContainerArguments name no --s3_base_uri; keep "
                             f"the ContainerArguments the SDK's @step builds", CLIENT_ERROR)
        self.prefixes = reads(self.arguments, base)

    def unpack_code(self, base: Path) -> None:
        """No code of its own: job_driver.sh and the workspace arrive as channels."""

    def code_paths(self) -> list[Path]:
        return []

    def workdir(self, host: str) -> Path:
        """The container's working folder, where the bootstrap unpacks workspace.zip and
        job_driver.sh finds ``sagemaker_remote_function_workspace``: a fresh one per host."""
        path = self.job_dir / "workdir" / host
        path.mkdir(parents=True, exist_ok=True)
        return path

    def code_cwd(self, host: str) -> Path:
        return self.workdir(host)

    def ready(self) -> None:
        # SageMaker: the image's Python, in which job_driver.sh installs the dependency file.
        # Here the runner's interpreter (the pickle's minor version, the runner's sagemaker; another
        # where TRAINPIPE_IMAGE_PYTHON maps the image, whose minor version the bootstrap checks as
        # SageMaker's does), in a layer of the job's own: what the bootstrap installs dies with the
        # job. No image guard:
        # the function's imports are known only from the pickle, which needs this SDK.
        sdk = sdk_v3_environment.client_sdk(self.arguments)
        # SDK v3: the image holds the client's SDK (v3 writes no requirement for it), so the
        # job's Python is the v3 environment the runner made before any step.
        try:
            made = sdk_v3_environment.interpreter(sdk, option(self.arguments, "client_python_version") or "") \
                if sdk else None
        except sdk_v3_environment.Unbuildable as why:  # made before any step: gone since
            raise JobFailure(f"training job {self.name}: an SDK v3 @step function: {why}", CLIENT_ERROR) from None
        self.python_env = job_environment.prepare(self.environments, self.image_uri, None, job_dir=self.job_dir,
                                                  interpreter=made)
        self.note(f"python: {self.python_env.python} (Python {self.python_env.interpreter.version}; "
                  f"job_driver.sh's pip installs land in {self.python_env.root})")

    def launch(self) -> None:
        self.server = S3Server(self.job_dir / "s3-server.log")
        self.client = self.server.client(self.region)
        self.sent = copy_in(self.storage, self.client, self.prefixes)
        self.note(f"S3: moto's server at {self.server.url} (AWS_ENDPOINT_URL), holding "
                  f"{len(self.sent)} object(s) of the run's store")
        super().launch()

    def host_environment(self, host: str) -> dict:
        env = self.container_environment(host)
        env.update(s3_variables(self.server.url, self.region))
        env.update({
            # SageMaker: the container runs as the image's user, root; as another user the
            # bootstrap runs `sudo chmod -R 777 /opt/ml/input ... /tmp` (bootstrap_runtime_environment.py
            # main), which here would reach the machine's own /tmp.
            "USER": "root", "LOGNAME": "root",
            # The job has no internet: job_driver.sh's `pip install -r ... -U` answers from what is
            # installed (why_not_local refused unmet requirements before any step).
            "PIP_NO_INDEX": "1",
            "PYTHONUNBUFFERED": "1",  # lines reach the log as printed
        })
        return env

    def command(self, host: str) -> list[str]:
        # SageMaker: the container runs ContainerEntrypoint + ContainerArguments (remote_function/job.py
        # JOBS_CONTAINER_ENTRYPOINT: /bin/bash /opt/ml/input/data/sagemaker_remote_function_bootstrap/job_driver.sh).
        specification = self.request.get("AlgorithmSpecification") or {}
        return [str(part) for part in specification["ContainerEntrypoint"]] + self.arguments

    def outcome(self) -> None:
        self.watch.poll()
        if self.first_failed is not None and self.watch.first is not None:
            # SageMaker: FailureReason is "AlgorithmError: " and the failure file (invoke_function's
            # repr of the exception, or the bootstrap's "RuntimeEnvironmentError: ...").
            raise JobFailure(f"AlgorithmError: {self.watch.first[1].strip()[:900]}", ALGORITHM_ERROR)
        super().outcome()

    def finish(self) -> None:
        # SageMaker: the job's model.tar.gz (empty: the function's output is its return value,
        # which invoke_function uploaded to S3OutputPath); no empty-model warning for it.
        master = self.host_dir(self.hosts[0])
        archive = self.job_dir / "artifacts" / MODEL_ARCHIVE
        pack_directory(master / "model", archive)
        self.storage.put_file(archive, self.model_uri)

    def always(self) -> None:
        try:
            if self.client is not None:
                # Also after a failure: the exception the SDK serialized is what a client reads.
                copy_back(self.storage, self.client, self.prefixes, self.sent)
        finally:
            if self.server is not None:
                self.server.close()
            super().always()

    def describe(self, status, reason, start, end) -> dict:
        doc = super().describe(status, reason, start, end)
        # Not SageMaker's: an @step's output is its return value, which invoke_function uploads
        # here (job_steps shows it as the step's detail).
        doc["FunctionResults"] = self.output_path
        return doc
