"""``python -m serving.handler --model-dir DIR [--code-dir DIR] --port P``: a framework model
(an SKLearn, PyTorch or TensorFlow image with an inference script) served as SageMaker's
framework containers serve it, through the sagemaker-inference toolkit's contract.

The script (``SAGEMAKER_PROGRAM``, the SDK's ``entry_point``) is imported from its folder:
``--code-dir`` (the local runner unpacks ``SAGEMAKER_SUBMIT_DIRECTORY``'s ``s3://``
sourcedir.tar.gz there), else ``SAGEMAKER_SUBMIT_DIRECTORY`` when it is a folder (a path
under ``/opt/ml/model`` is read under ``--model-dir``), else ``<model-dir>/code``, where the SDK
repacks the script into model.tar.gz. Its functions, as the toolkit's ``Transformer`` calls them:

    model_fn(model_dir)                  -> model, once before /ping answers 200 (required)
    input_fn(input_data, content_type)   -> data       (str for JSON and CSV bodies, else bytes)
    predict_fn(data, model)              -> prediction
    output_fn(prediction, accept)        -> bytes or str, or (body, content_type)
    transform_fn(model, input_data, content_type, accept)  instead of the three above
    pre_model_fn(model_dir), model_warmup_fn(model_dir, model)   before and after model_fn

Each may take one more argument, the toolkit's ``context`` (here ``system_properties`` only).
Where the script leaves one out, the SKLearn container's default runs: ``input_fn`` decodes
JSON, CSV and NPY to a numpy array (JSON and CSV as float32; a CSV body of one row is a 1-D
array, as there), ``predict_fn`` is ``model.predict(data)``, ``output_fn`` encodes to JSON, CSV or NPY by
``Accept`` (``*/*`` or none: ``SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT``, else JSON). There is no
default ``model_fn``. Unlike the toolkit, an NPY body is loaded without pickle.

An error raised by the script answers 500 (or the exception's ``status_code``), one line
naming the script and the function; its traceback goes to this server's log, and the server
keeps serving. A default's refusal is a 400 or 415 naming what it reads.

The script's ``requirements.txt`` is NOT installed (a job has no network here): each line is
checked against this environment and those not satisfied are printed at startup; install
them into the environment the runner uses. Requests are answered one at a time (as one
model-server worker answers them), so a script need not be thread-safe.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import importlib.util
import inspect
import io
import json
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from serving import web
from serving.web import DEFAULT_PORT, MAX_BODY_BYTES, REQUEST_TIMEOUT_SECONDS, RequestError, error
from training_entry import contract

# The sagemaker-inference toolkit's content types and settings.
JSON_TYPE, CSV_TYPE, NPY_TYPE = "application/json", "text/csv", "application/x-npy"
UTF8_TYPES = (JSON_TYPE, CSV_TYPE)  # handed to input_fn as str, the others as bytes
ANY = "*/*"
DEFAULT_ACCEPT_ENV = "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT"
SERVER_TIMEOUT_ENV = "SAGEMAKER_MODEL_SERVER_TIMEOUT"  # seconds a request may take (default 60)
REQUIREMENTS = "requirements.txt"
PIPELINE = ("input_fn", "predict_fn", "output_fn")


class LoadError(Exception):
    """The script or its model cannot be served: one line saying why and what to do."""


class ScriptError(Exception):
    """A script's function raised: ``status`` and one line naming the script and function."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


# --- The SKLearn container's defaults (sagemaker-scikit-learn-container serving.py) ------

def default_input_fn(input_data, content_type):
    kind = media_type(content_type)
    if kind == NPY_TYPE:
        try:
            return np.load(io.BytesIO(input_data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise RequestError(f"the body is not a .npy array the default input_fn can load: {e}") from None
    if kind == JSON_TYPE:
        try:
            rows = json.loads(input_data)
        except ValueError as e:
            raise RequestError(f"the body is not JSON: {e}") from None
        except RecursionError:
            raise RequestError("the JSON body nests deeper than the parser reads (about 1000 levels); "
                               "the default input_fn reads a row or a list of rows") from None
    elif kind == CSV_TYPE:
        try:
            rows = [row for row in csv.reader(io.StringIO(input_data)) if row]
        except csv.Error as e:
            raise RequestError(f"the CSV body is not one the default input_fn reads: {e} (one value "
                               f"over {csv.field_size_limit()} characters); send rows of numbers") from None
    else:
        raise RequestError(f"Content type {content_type} is not one the default input_fn reads "
                           f"({JSON_TYPE}, {CSV_TYPE}, {NPY_TYPE}): define input_fn in the script", 415)
    try:
        array = np.array(rows, dtype=np.float32)
    except (ValueError, TypeError) as e:
        raise RequestError(f"the default input_fn reads numbers only (a row, or a list of rows of equal "
                           f"width) and this {kind} body is not that ({e}): define input_fn in the script") from None
    return array.squeeze() if kind == CSV_TYPE else array  # the container's CSV decoder squeezes


def default_predict_fn(data, model):
    return model.predict(data)


def default_output_fn(prediction, accept):
    return encode(prediction, accept)


def encode(prediction, accept: str) -> tuple[bytes, str]:
    """(body, its type): the first type in ``Accept`` that JSON, CSV or NPY encoding serves."""
    kinds = [media_type(k) for k in accept.split(",")] if accept else [JSON_TYPE]
    for kind in kinds:
        if kind in (JSON_TYPE, ANY):
            return json.dumps(prediction, default=_jsonable).encode(), JSON_TYPE
        if kind == CSV_TYPE:
            out = io.StringIO()
            np.savetxt(out, np.asarray(prediction), delimiter=",", fmt="%s")
            return out.getvalue().encode(), CSV_TYPE
        if kind == NPY_TYPE:
            out = io.BytesIO()
            np.save(out, np.asarray(prediction), allow_pickle=False)
            return out.getvalue(), NPY_TYPE
    raise RequestError(f"Accept {accept} is not one the default output_fn encodes ({JSON_TYPE}, {CSV_TYPE}, "
                       f"{NPY_TYPE}): define output_fn in the script", 415)


def _jsonable(value):
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


DEFAULTS = {"input_fn": default_input_fn, "predict_fn": default_predict_fn, "output_fn": default_output_fn}


# --- The script ---------------------------------------------------------------------------

def code_dir_of(model_dir: Path, code_dir: str | None, environ=os.environ) -> Path:
    """The script's folder (see the module's docstring for the order)."""
    if code_dir:
        return Path(code_dir)
    submit = environ.get(contract.SUBMIT_DIRECTORY_ENV, "")
    if submit.startswith("s3://"):
        raise LoadError(f"{contract.SUBMIT_DIRECTORY_ENV} {submit} is in S3: unpack it and pass --code-dir "
                        "(the local runner does)")
    if not submit:
        return model_dir / "code"
    local = submit.removeprefix("file://")
    if local == contract.MODEL_DIR or local.startswith(contract.MODEL_DIR + "/"):
        local = str(model_dir) + local[len(contract.MODEL_DIR):]
    return Path(local)


def unmet_requirements(code_dir: Path) -> list[str]:
    """The lines of the script's requirements.txt this environment does not satisfy."""
    path = code_dir / REQUIREMENTS
    if not path.is_file():
        return []
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    unmet = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue  # pip options (-r, -e, --index-url): nothing to check here
        try:
            wanted = Requirement(line)
        except InvalidRequirement:
            unmet.append(line)
            continue
        if wanted.marker is not None and not wanted.marker.evaluate():
            continue
        try:
            have = metadata.version(wanted.name)
        except metadata.PackageNotFoundError:
            unmet.append(line)
            continue
        if not wanted.specifier.contains(have, prereleases=True):
            unmet.append(f"{line} (this environment has {have})")
    return unmet


def import_script(code_dir: Path, program: str) -> types.ModuleType:
    """The script as a module named after it, its folder first on sys.path (as the toolkit
    imports it: siblings in the folder import too)."""
    if not program:
        raise LoadError(f"{contract.PROGRAM_ENV} is not set: name the inference script (the SDK's entry_point)")
    path = code_dir / program
    if not path.is_file():
        found = sorted(p.name for p in code_dir.glob("*.py")) if code_dir.is_dir() else []
        raise LoadError(f"the inference script {program} is not in {code_dir} "
                        f"({'it has ' + ', '.join(found) if found else 'no Python files there'})")
    sys.path.insert(0, str(code_dir))
    name = Path(program).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        traceback.print_exc()
        hint = ""
        if isinstance(e, ImportError) and (code_dir / REQUIREMENTS).is_file():
            hint = f" ({REQUIREMENTS} is not installed locally: jobs have no network; install it into this environment)"
        raise LoadError(f"{program}: importing it raised {type(e).__name__}: {e}{hint}") from None
    return module


class Script:
    """The script's functions, the defaults where it leaves one out, and its model."""

    def __init__(self, module: types.ModuleType, program: str, model_dir: Path):
        self.program, self.model_dir = program, model_dir
        found = {name: getattr(module, name, None)
                 for name in ("model_fn", "transform_fn", *PIPELINE, "pre_model_fn", "model_warmup_fn")}
        if found["transform_fn"] and any(found[name] for name in PIPELINE):
            raise LoadError(f"{program} defines transform_fn and also input_fn, predict_fn or output_fn; the "
                            "toolkit refuses the mix: keep transform_fn alone, or the three")
        if found["model_fn"] is None:
            tfs = [n for n in ("input_handler", "output_handler", "handler") if hasattr(module, n)]
            if tfs:
                raise LoadError(f"{program} defines {', '.join(tfs)}: TensorFlow Serving's pre/post-processing "
                                "contract, which the local runner does not run; serve the SavedModel without a "
                                "script, or write model_fn/input_fn/predict_fn/output_fn")
            raise LoadError(f"{program} defines no model_fn(model_dir): the SKLearn container has no default "
                            "loader; define one that loads the model from model_dir, e.g. "
                            "joblib.load(os.path.join(model_dir, 'model.joblib'))")
        self.functions = {name: found[name] or DEFAULTS.get(name) for name in found}
        self.defaulted = sorted(name for name in PIPELINE if found[name] is None and not found["transform_fn"])
        self.context = types.SimpleNamespace(system_properties={"model_dir": str(model_dir), "gpu_id": None})
        self.lock = threading.Lock()
        self.model = None

    def load_model(self) -> None:
        try:
            if self.functions["pre_model_fn"]:
                self.call("pre_model_fn", str(self.model_dir))
            self.model = self.call("model_fn", str(self.model_dir))
            if self.functions["model_warmup_fn"]:
                self.call("model_warmup_fn", str(self.model_dir), self.model)
        except ScriptError as e:
            raise LoadError(str(e)) from None

    def call(self, name: str, *args):
        """The toolkit's call: with ``context`` where the function takes one more argument."""
        function = self.functions[name]
        where = f"{self.program}: {name}" if function is not DEFAULTS.get(name) else f"the default {name}"
        try:
            count = len(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            count = len(args)
        if count == len(args) + 1:
            args = (*args, self.context)
        elif count != len(args):
            raise ScriptError(f"{where} takes {count} argument(s); the toolkit passes {len(args)} "
                              f"(or {len(args) + 1} with context)")
        try:
            return function(*args)
        except RequestError:
            raise  # a default's refusal of the request: already one line with its status
        except Exception as e:
            traceback.print_exc()
            status = getattr(e, "status_code", None)
            status = status if isinstance(status, int) and 400 <= status < 600 else 500
            raise ScriptError(f"{where} raised {type(e).__name__}: {e}{_hint(name, args)}", status) from None

    def invoke(self, body: bytes, content_type: str, accept: str) -> tuple[bytes, str]:
        """(answer, its content type) for one request, as the toolkit's ``transform``."""
        data = body
        if media_type(content_type) in UTF8_TYPES:
            try:
                data = body.decode("utf-8")
            except UnicodeDecodeError as e:
                raise RequestError(f"the {media_type(content_type)} body is not UTF-8: {e}") from None
        with self.lock:
            if self.functions["transform_fn"]:
                result = self.call("transform_fn", self.model, data, content_type, accept)
            else:
                decoded = self.call("input_fn", data, content_type)
                prediction = self.call("predict_fn", decoded, self.model)
                result = self.call("output_fn", prediction, accept)
        answer, answer_type = result if isinstance(result, tuple) and len(result) == 2 else (result, accept)
        if isinstance(answer, str):
            answer = answer.encode("utf-8")
        if not isinstance(answer, (bytes, bytearray)):
            last = "transform_fn" if self.functions["transform_fn"] else "output_fn"
            raise ScriptError(f"{self.program}: {last} returned a {type(answer).__name__}; return bytes or str "
                              "(or (body, content_type)), as the toolkit's encoders do")
        return bytes(answer), str(answer_type or JSON_TYPE)


def _hint(name: str, args: tuple) -> str:
    data = args[0] if args else None
    if name == "predict_fn" and isinstance(data, np.ndarray) and data.ndim == 1:
        return (" (the input is 1-D: a CSV body of one row or column decodes to a 1-D array, as in SageMaker's "
                "SKLearn container; send MultiRecord batches or reshape in input_fn)")
    return ""


# --- The server ---------------------------------------------------------------------------

class Holder:
    """The script and its model once loaded; the load runs beside the server (/ping 503)."""

    def __init__(self, model_dir: str, code_dir: str | None, program: str):
        self.model_dir, self.code_dir, self.program = Path(model_dir), code_dir, program
        self.script: Script | None = None
        self.failure: str | None = None
        self.unmet: list[str] = []

    def load(self) -> None:
        try:
            code_dir = code_dir_of(self.model_dir, self.code_dir)
            self.code_dir = str(code_dir)
            self.unmet = unmet_requirements(code_dir)
            script = Script(import_script(code_dir, self.program), self.program, self.model_dir)
            script.load_model()
            self.script = script
        except LoadError as e:
            self.failure = str(e)


def default_accept(environ=os.environ) -> str:
    return environ.get(DEFAULT_ACCEPT_ENV) or JSON_TYPE


def server_timeout(environ=os.environ) -> float:
    try:
        return float(environ.get(SERVER_TIMEOUT_ENV) or REQUEST_TIMEOUT_SECONDS)
    except ValueError:
        raise SystemExit(f"serve: error: {SERVER_TIMEOUT_ENV}={environ[SERVER_TIMEOUT_ENV]!r} is not a number "
                         "of seconds") from None


def build_app(holder: Holder, max_body: int = MAX_BODY_BYTES, timeout: float | None = None,
              queue: float = web.QUEUE_SECONDS) -> Starlette:
    timeout = server_timeout() if timeout is None else timeout
    # One call at a time, as one model-server worker answers them (Script.lock says the same);
    # a call past its time keeps the worker until it returns, and the requests behind it get
    # 503 after ``queue`` seconds instead of piling up threads.
    pool = web.Workers(1, queue)

    async def ping(request: Request) -> Response:
        if holder.script is None:
            return error(503, holder.failure or "the model is still loading")
        return Response(b"", 200)

    async def invocations(request: Request) -> Response:
        script = holder.script
        if script is None:
            return error(503, holder.failure or "the model is still loading; retry after GET /ping returns 200")
        body = await web.read_body(request, max_body)
        if isinstance(body, Response):
            return body
        content_type = request.headers.get("content-type") or JSON_TYPE
        accept = request.headers.get("accept")
        if not accept or accept.strip() == ANY:
            accept = default_accept()
        try:
            answer, answer_type = await pool.call(script.invoke, body, content_type, accept, timeout=timeout)
        except (RequestError, ScriptError) as e:
            return error(e.status, str(e))
        except web.Busy as e:
            return error(503, str(e))
        except asyncio.TimeoutError:
            return error(504, f"the model took more than {timeout:g} s to answer")
        return Response(answer, 200, media_type=answer_type)

    routes = [
        Route("/ping", ping, methods=["GET"]),
        Route("/invocations", invocations, methods=["POST"]),
        Route("/endpoints/{endpoint}/invocations", invocations, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers=web.EXCEPTION_HANDLERS)


def serve(model_dir: str, code_dir: str | None, program: str, host: str, port: int,
          access_log: bool = False) -> int:
    holder = Holder(model_dir, code_dir, program)

    def load(server) -> None:
        started = time.monotonic()
        holder.load()
        for line in holder.unmet:
            print(f"serve: warning: {REQUIREMENTS} wants {line}, which this environment lacks; it is not "
                  "installed here (jobs have no network)", file=sys.stderr, flush=True)
        if holder.failure:
            print(f"serve: error: {holder.failure}", file=sys.stderr, flush=True)
            server.should_exit = True
            return
        defaults = f"; default {', '.join(holder.script.defaulted)}" if holder.script.defaulted else ""
        print(f"serving {program} from {holder.code_dir} (model {model_dir}{defaults}) on http://{host}:{port}: "
              f"started in {web.process_seconds():.1f} s (model {time.monotonic() - started:.1f} s), memory "
              f"{web.resident_mib():.0f} MiB resident", flush=True)

    server = web.run(build_app(holder), host, port, load, access_log)
    if holder.failure or not server.started:
        return 1  # why was said above (or by uvicorn: the port was taken)
    web.say_stopped()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.handler", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="the model archive, extracted (/opt/ml/model)")
    parser.add_argument("--code-dir", help="the script's folder (default: see above)")
    parser.add_argument("--program", default=os.environ.get(contract.PROGRAM_ENV, ""),
                        help=f"the script's file name (default: ${contract.PROGRAM_ENV})")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--access-log", action="store_true", help="one line per request")
    args = parser.parse_args(argv)
    return serve(args.model_dir, args.code_dir, args.program, args.host, args.port, args.access_log)


if __name__ == "__main__":
    sys.exit(main())
