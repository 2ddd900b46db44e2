"""A Transform (batch transform) job on this machine, as SageMaker runs one: the model's
serving container on each of ``InstanceCount`` instances, the input objects under
``TransformInput``'s S3 prefix split across them (each object whole on one instance), every
object's records sent to its instance's ``/invocations`` and the answers written to
``<S3OutputPath>/<object's path under the prefix>.out``.

An instance is ``python -m serving.server`` (a TensorFlow Serving model, the code behind
``trainpipe serve``) or ``python -m serving.handler`` (a framework model's inference script)
on a port of 127.0.0.1; records, batches, joins and filters are ``transform_records.py``.
A framework model's server runs where a Training job on its image would (``serving_facts``,
``environments/``): the image's Python over the image's pinned versions of what the inference
script imports, the image's framework and numpy, so a model pickled by the image's
scikit-learn loads with it.

Each request to a server ends by ``ModelClientConfig.InvocationsTimeoutInSeconds`` as a whole
(``model_client.py``), and a request that fails (no complete answer in time, a broken
connection, a 5xx) is tried again up to ``InvocationsMaxRetries`` times, as SageMaker does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import signal
import socket
import subprocess
import tarfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.jobs import model_client
from pipeline.local.jobs import transform_records as tr
from pipeline.local.jobs.environments import environment as job_environment
from pipeline.local.jobs.environments.environment import JobEnvironment
from pipeline.local.jobs.failures import ALGORITHM_ERROR, CLIENT_ERROR, INTERNAL_ERROR, JobFailure
from pipeline.local.jobs.lifecycle import (
    ENVIRONMENTS,
    HOMES,
    JobResult,
    JobStopped,
    arn,
    base_environment,
)
from pipeline.local.jobs.logs import now_iso
from pipeline.local.store.private import private_dir
from pipeline.local.store.storage import Storage, StorageError
from training_entry.contract import SUBMIT_DIRECTORY_ENV

KIND = "Transform"
STARTUP_SECONDS = 180  # SageMaker: a container must answer /ping within minutes
# SageMaker's ModelClientConfig: its defaults and the ranges CreateTransformJob accepts.
DEFAULT_INVOCATION_TIMEOUT, INVOCATION_TIMEOUT_RANGE = 600, (1, 3600)  # InvocationsTimeoutInSeconds
DEFAULT_INVOCATION_RETRIES, INVOCATION_RETRIES_RANGE = 3, (0, 3)  # InvocationsMaxRetries
PING_SECONDS = 5  # one /ping while the server starts, whole
HUNG_STOP_SECONDS = 2  # a server past an invocation's deadline: its drain would wait for that request
DEFAULT_MAX_PAYLOAD_MB = 6
TFS, FRAMEWORK = "tfs", "framework"  # dag/inference.py's kinds, passed in by the runner
SERVER_MODULES = {TFS: "serving.server", FRAMEWORK: "serving.handler"}


def settings_of(request: dict) -> tr.Settings:
    """The request's record settings; a value SageMaker would refuse is one line."""
    source = request.get("TransformInput") or {}
    output = request.get("TransformOutput") or {}
    processing = request.get("DataProcessing") or {}
    split_type = source.get("SplitType", "None")
    strategy = request.get("BatchStrategy") or ("MultiRecord" if split_type == "Line" else "SingleRecord")
    assemble = output.get("AssembleWith", "None")
    join = processing.get("JoinSource", "None")
    checks = [("SplitType", split_type, ("None", "Line")), ("BatchStrategy", strategy, ("SingleRecord", "MultiRecord")),
              ("AssembleWith", assemble, ("None", "Line")), ("JoinSource", join, ("None", "Input"))]
    for name, value, allowed in checks:
        if value not in allowed:
            raise JobFailure(f"ClientError: {name} {value!r} is not one the local runner reads: {', '.join(allowed)}",
                             CLIENT_ERROR)
    if source.get("CompressionType", "None") not in ("None", None):
        raise JobFailure("ClientError: CompressionType Gzip input is not read locally; decompress it first", CLIENT_ERROR)
    megabytes = int(request.get("MaxPayloadInMB", DEFAULT_MAX_PAYLOAD_MB))
    if not 0 <= megabytes <= 100:
        raise JobFailure(f"ClientError: MaxPayloadInMB {megabytes} is outside 0..100", CLIENT_ERROR)
    return tr.Settings(content_type=source.get("ContentType"), accept=output.get("Accept"), split_type=split_type,
                       batch_strategy=strategy, max_payload_bytes=megabytes * tr.MEGABYTE, assemble_with=assemble,
                       input_filter=processing.get("InputFilter", "$"), output_filter=processing.get("OutputFilter", "$"),
                       join_input=join == "Input")


def client_config(request: dict) -> tuple[float, int]:
    """(InvocationsTimeoutInSeconds, InvocationsMaxRetries) of the request's ModelClientConfig,
    SageMaker's defaults where unset; a value CreateTransformJob would refuse is one line."""
    config = request.get("ModelClientConfig") or {}
    values = []
    for name, default, (low, high) in (("InvocationsTimeoutInSeconds", DEFAULT_INVOCATION_TIMEOUT, INVOCATION_TIMEOUT_RANGE),
                                       ("InvocationsMaxRetries", DEFAULT_INVOCATION_RETRIES, INVOCATION_RETRIES_RANGE)):
        raw = config.get(name, default)
        try:
            value = int(str(raw))
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise JobFailure(f"ClientError: ModelClientConfig {name} {raw!r} is not a whole number from {low} to "
                             f"{high}, as SageMaker requires", CLIENT_ERROR)
        values.append(value)
    return float(values[0]), values[1]


def input_objects(storage: Storage, request: dict) -> tuple[str, list[str]]:
    """(the prefix's folder, the objects under it, sorted)."""
    s3 = ((request.get("TransformInput") or {}).get("DataSource") or {}).get("S3DataSource") or {}
    if s3.get("S3DataType", "S3Prefix") != "S3Prefix":
        raise JobFailure(f"ClientError: S3DataType {s3.get('S3DataType')} is not read locally; use S3Prefix", CLIENT_ERROR)
    prefix = str(s3.get("S3Uri") or "")
    objects = [uri for uri in storage.list(prefix) if not uri.endswith("/")]
    if not objects:
        raise JobFailure(f"ClientError: no input objects under {prefix}", CLIENT_ERROR)
    return prefix[: prefix.rfind("/") + 1], objects


def output_uri(output_path: str, folder: str, uri: str) -> str:
    return output_path.rstrip("/") + "/" + uri[len(folder):] + ".out"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Instance:
    """One instance: its model server, and the objects it transforms."""

    def __init__(self, host: str, kind: str, model_dir: Path, log: Path, env: dict, python: str,
                 code_dir: Path | None = None):
        """``env``: the server's whole environment (``TransformJob.server_environment``)."""
        self.host, self.port, self.log = host, _free_port(), log
        private_dir(log.parent)
        argv = [python, "-m", SERVER_MODULES[kind], "--model-dir", str(model_dir), "--port", str(self.port)]
        if code_dir is not None:
            argv += ["--code-dir", str(code_dir)]  # the framework script's unpacked sourcedir.tar.gz
        with open(log, "ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.hung = False  # set once a request to it missed its deadline

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise JobFailure(f"AlgorithmError: the model server of {self.host} exited {self.process.returncode}: "
                                 f"{_tail(self.log)}", ALGORITHM_ERROR)
            try:
                if model_client.request("GET", self.url + "/ping", PING_SECONDS)[0] == 200:
                    return
            except model_client.NoAnswer:  # not listening yet, or too slow: asked again
                pass
            time.sleep(0.2)
        raise JobFailure(f"AlgorithmError: the model server of {self.host} did not answer /ping in "
                         f"{STARTUP_SECONDS} s: {_tail(self.log)}", ALGORITHM_ERROR)

    def invoke(self, body: bytes, settings: tr.Settings, timeout: float, retries: int, where: str) -> bytes:
        """The answer to one request, each try whole within ``timeout`` seconds; a failed try
        (no complete answer, a broken connection, a 5xx) is made again up to ``retries`` times.
        A 4xx is the request's fault and is not tried again."""
        headers = {"Content-Type": settings.content_type or "application/json"}
        if settings.accept:
            headers["Accept"] = settings.accept
        missed = 0
        for _ in range(retries + 1):
            try:
                status, answer = model_client.request("POST", self.url + "/invocations", timeout, body, headers)
            except model_client.DeadlineMissed:
                missed += 1
                self.hung = True
                continue
            except model_client.NoAnswer as error:
                if self.process.poll() is not None:  # the server is gone: no try can succeed
                    raise JobFailure(f"AlgorithmError: {where}: the model server of {self.host} exited "
                                     f"{self.process.returncode}: {_tail(self.log)}", ALGORITHM_ERROR) from None
                last = f"no answer from the model server of {self.host} ({error})"
                continue
            if status < 400:
                return answer
            detail = answer.decode("utf-8", "replace").strip()[:500]
            if status < 500:
                raise JobFailure(f"ClientError: {where}: the model answered {status}: {detail}", CLIENT_ERROR)
            last = f"the model answered {status}: {detail}"
        tries = retries + 1
        if missed == tries:
            raise JobFailure(
                f"AlgorithmError: {where}: the model server of {self.host} gave no complete answer within "
                f"{timeout:g} s, {tries} time(s) (ModelClientConfig InvocationsTimeoutInSeconds {timeout:g}, "
                f"InvocationsMaxRetries {retries}); if the model needs longer, raise InvocationsTimeoutInSeconds "
                f"(at most 3600) in the transform's model_client_config, else find what holds the server up in "
                f"its log: {_tail(self.log)}", ALGORITHM_ERROR)
        raise JobFailure(f"AlgorithmError: {where}: {last}, after {tries} tries: {_tail(self.log)}",
                         ALGORITHM_ERROR)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the server drains, then exits
            try:
                # A hung server's drain waits for the very request that hung it.
                self.process.wait(timeout=HUNG_STOP_SECONDS if self.hung else 30)
            except subprocess.TimeoutExpired:
                # Its own session (start_new_session): whatever it started goes with it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


# SageMaker: a framework image's model server loads the model with the image's framework (a
# pickled scikit-learn estimator unpickles with the image's scikit-learn, whatever the script
# imports: joblib alone, say) and decodes requests with its numpy.
SERVED_FRAMEWORKS = {"aws-sklearn-": ("sklearn",), "aws-xgboost-": ("xgboost",), "aws-pytorch": ("torch",),
                     "aws-tensorflow": ("tensorflow",), "aws-huggingface-": ("transformers", "torch")}
# What serving.handler itself imports beyond the standard library and numpy: the image's own
# server (multi-model-server, Flask) stands in its place there, so these come from the package
# index at what resolves for the image's Python, under the record's pins.
SERVER_DISTRIBUTIONS = ("starlette", "uvicorn", "packaging")
# serving.handler's own code needs this Python or later (``from __future__ import annotations``).
SERVER_MIN_PYTHON = (3, 7)


def serving_facts(image_uri: str, kind: str, code_dir: Path) -> tuple[job_environment.CodeFacts | None, str]:
    """(what the model server of a framework model imports, for ``choose``: the inference
    script's imports (``code_dir``'s .py files; its requirements.txt is checked, not installed,
    by the handler), the image's framework and numpy; a clause for the job's log where the
    server cannot run where the image's would). None (the runner's Python, as before) for a
    TensorFlow Serving model, an image with no record, or one whose Python cannot run the server."""
    if kind != FRAMEWORK:
        return None, ""
    scripts = sorted(code_dir.rglob("*.py"))[:2000] if code_dir.is_dir() else []
    code = job_environment.facts(image_uri, None, scripts)
    if code.record is None:
        return None, ""
    if code.record.python_minor < SERVER_MIN_PYTHON:
        return None, (f"the image's Python {code.record.python} cannot run trainpipe's model server (it needs "
                      f"{'.'.join(map(str, SERVER_MIN_PYTHON))} or later): this machine's runs it, with this "
                      f"machine's versions of what the inference script imports")
    served = next((modules for prefix, modules in SERVED_FRAMEWORKS.items() if code.record.name.startswith(prefix)), ())
    imports = code.imports | (frozenset((*served, "numpy")) & code.record.modules)
    return dataclasses.replace(code, imports=imports, runtime=SERVER_DISTRIBUTIONS), ""


def _repository_path() -> str:
    """Where the serving package is (this checkout, or the installed package's site);
    found, not imported: pipeline never runs TensorFlow itself."""
    spec = importlib.util.find_spec("serving")
    if spec is None or spec.origin is None:
        raise JobFailure("InternalError: the serving package is not installed beside pipeline", ALGORITHM_ERROR)
    return str(Path(spec.origin).resolve().parents[1])


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


class TransformJob:
    """``run()`` -> JobResult (kind Transform), its description the step's properties."""

    def __init__(self, request: dict, name: str, storage: Storage, job_dir: Path, *, model: dict,
                 region: str, account: str, echo=None, environments: Path | None = None):
        self.request, self.name, self.storage, self.job_dir = request, name, storage, Path(job_dir)
        self.model, self.region, self.account = model, region, account
        # Cached between jobs where the caller says (the workdir's), as for Training jobs.
        self.environments = Path(environments) if environments else self.job_dir / ENVIRONMENTS
        self.python_env: JobEnvironment | None = None
        self.echo = echo or (lambda line: None)
        self.log = self.job_dir / "job.log"
        self.description = {
            **{k: v for k, v in request.items() if k != "Tags"},
            "TransformJobName": name, "TransformJobArn": arn(region, account, "transform-job", name),
            "TransformJobStatus": "InProgress", "CreationTime": now_iso(),
        }

    def say(self, line: str) -> None:
        with open(self.log, "a") as f:
            f.write(line + "\n")
        self.echo(line)

    def server_environment(self, host: str) -> dict:
        """What a model server starts with, as a Training job's processes: the runner's
        allowlisted variables (no credential), a HOME of its own, its job environment's
        Python first on PATH, then the model's Environment (SageMaker sets it in the
        container). The serving package is found through PYTHONPATH, as the job environment
        does not see the runner's editable install."""
        home = private_dir(self.job_dir / HOMES / host)
        env = base_environment(dict(os.environ), home=home, python=self.python_env)
        env.update({k: str(v) for k, v in (self.model.get("Environment") or {}).items()})
        env.update(PYTHONPATH=_repository_path(), TF_CPP_MIN_LOG_LEVEL=env.get("TF_CPP_MIN_LOG_LEVEL", "2"))
        return env

    def run(self) -> JobResult:
        # Private, as a Training job's: the model's Environment and its records are in it.
        private_dir(self.job_dir)
        start = time.time()
        self.description["TransformStartTime"] = now_iso()
        instances: list[Instance] = []
        status, reason, failure_type = "Completed", None, None
        try:
            settings = settings_of(self.request)
            timeout, retries = client_config(self.request)
            folder, objects = input_objects(self.storage, self.request)
            count = int((self.request.get("TransformResources") or {}).get("InstanceCount", 1))
            shares = [objects[i::count] for i in range(count)]
            model_dir, code_dir = self._model_dir(), self._code_dir()
            # SageMaker: the container's own Python, thrown away with it; here a job environment
            # of the model's image, never trainpipe's venv (a script's pip install lands there):
            # the image's Python and versions where a Training job would get them (``serving_facts``).
            image = str(self.model.get("Image") or "")
            code, unserved = serving_facts(image, self.model["kind"], code_dir or model_dir / "code")
            self.python_env = job_environment.prepare(self.environments, image, code=code)
            interpreter = self.python_env.interpreter
            why = interpreter.why or unserved
            self.say(f"python: {self.python_env.python} (Python {interpreter.version}" + (f": {why}" if why else "") + ")")
            for index, share in enumerate(shares, 1):
                if share:  # SageMaker: an instance with no object still starts; here it need not
                    host = f"algo-{index}"
                    instances.append(Instance(host, self.model["kind"], model_dir,
                                              self.job_dir / "hosts" / host / "server.log",
                                              self.server_environment(host), self.python_env.python, code_dir))
            for instance in instances:
                instance.wait_ready()
            self.say(f"{len(objects)} object(s) on {len(instances)} instance(s): {[len(s) for s in shares]}")
            with ThreadPoolExecutor(len(instances)) as pool:
                list(pool.map(lambda pair: self._transform(pair[0], pair[1], folder, settings, timeout, retries),
                              zip(instances, [s for s in shares if s], strict=True)))
        except JobFailure as failure:
            status, reason, failure_type = "Failed", failure.reason, failure.failure_type
        except (StorageError, ValueError, UserError) as error:
            status, reason, failure_type = "Failed", f"ClientError: {error}", CLIENT_ERROR
        except KeyboardInterrupt:
            for instance in instances:
                instance.stop()
            raise JobStopped(self._result("Stopped", "stopped", None, start)) from None
        except Exception as error:  # noqa: BLE001 - anything else is still the job's end
            # SageMaker: whatever goes wrong, the job ends Failed with a reason; the traceback
            # goes to the job's log for whoever debugs the runner, not to the runner's output.
            status, reason, failure_type = "Failed", f"InternalServerError: {type(error).__name__}: {error}", INTERNAL_ERROR
            with open(self.log, "a") as f:
                f.write(traceback.format_exc())
        finally:
            for instance in instances:
                instance.stop()
        if reason:  # the runner's last line says why; the log keeps it here
            with open(self.log, "a") as f:
                f.write(f"Failed: {reason}\n")
            self.echo(f"Failed after {time.time() - start:.1f}s")
        return self._result(status, reason, failure_type, start)

    def _result(self, status: str, reason: str | None, failure_type: str | None, start: float) -> JobResult:
        self.description.update(TransformJobStatus=status, TransformEndTime=now_iso())
        if reason:
            self.description["FailureReason"] = reason
        return JobResult(self.name, KIND, status, self.description, self.job_dir, self.log, start, time.time(),
                         failure_reason=reason, failure_type=failure_type)

    def _model_dir(self) -> Path:
        """The model's archive, extracted as its container's /opt/ml/model."""
        url = self.model.get("ModelDataUrl")
        if not url:
            raise JobFailure("ClientError: the model has no ModelDataUrl: nothing to serve", CLIENT_ERROR)
        return self._extract(str(url), self.job_dir / "model", "the model archive")

    def _code_dir(self) -> Path | None:
        """A framework model's script folder where it is an ``s3://`` sourcedir.tar.gz (the SDK's
        entry_point without repacking), unpacked as the container unpacks it; else None: the
        handler finds it in the model (``/opt/ml/model/code``, where the SDK repacked it)."""
        submit = str((self.model.get("Environment") or {}).get(SUBMIT_DIRECTORY_ENV) or "")
        if self.model["kind"] != FRAMEWORK or not submit.startswith("s3://"):
            return None
        return self._extract(submit, self.job_dir / "code", SUBMIT_DIRECTORY_ENV)

    def _extract(self, url: str, target: Path, what: str) -> Path:
        from training_entry import archives

        archive = self.job_dir / Path(url).name
        self.storage.get_file(url, archive)
        private_dir(target)  # the model and its code: this user's only
        try:
            archives.extract(str(archive), str(target))
        except (OSError, EOFError, ValueError, tarfile.TarError) as error:
            raise JobFailure(f"ClientError: cannot extract {what} {url}: {error}", CLIENT_ERROR) from None
        archive.unlink()
        return target

    def _transform(self, instance: Instance, objects: list[str], folder: str, settings: tr.Settings,
                   timeout: float, retries: int) -> None:
        output_path = str((self.request.get("TransformOutput") or {}).get("S3OutputPath") or "")
        for uri in objects:
            started = time.monotonic()
            records = tr.split(self.storage.read_bytes(uri), settings.split_type)
            sent = [tr.filter_input(r, settings) for r in records]
            parts = []
            for batch in tr.batches(sent, settings):
                where = f"{uri} record {batch[0] + 1}" + (f"-{batch[-1] + 1}" if len(batch) > 1 else "")
                answer = instance.invoke(tr.body(sent, batch), settings, timeout, retries, where)
                if not settings.per_record:
                    parts.append(answer)
                    continue
                outputs = tr.per_record(answer, len(batch), where)
                parts.extend(tr.joined(records[i], out, settings) for i, out in zip(batch, outputs, strict=True))
            target = output_uri(output_path, folder, uri)
            self.storage.put_bytes(tr.assemble(parts, settings.assemble_with), target)
            self.say(f"{instance.host}: {uri} -> {target}: {len(records)} record(s) in "
                     f"{time.monotonic() - started:.2f} s")
