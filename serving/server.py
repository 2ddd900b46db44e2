"""``python -m serving.server --model-dir DIR``: one model over HTTP, as SageMaker's TensorFlow
Serving container serves it (``trainpipe serve`` resolves the model and runs this).

Routes:
    GET  /ping                                 200 once the model is loaded, 503 before
    POST /invocations                          SageMaker's (codec.py: JSON, CSV, images)
    POST /endpoints/<name>/invocations         the runtime API's path (boto3 ``endpoint_url``)
    GET  /v1/models/<name>[/metadata]          TF Serving's status and metadata
    POST /v1/models/<name>:predict             TF Serving's predict (JSON)

Uvicorn runs a Starlette app in this one process: the model is loaded once (no forked
copies of TensorFlow), requests are parsed on the event loop and the model runs on Starlette's
thread pool, so several clients are answered at once (``MODEL_WORKERS`` model calls at a time;
``web.py`` says what bounds a slow or stalled client). SIGTERM or Ctrl-C: no new connections,
the requests in flight are answered, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from serving import codec, web
from serving.model import ServedModel
from serving.web import (  # noqa: F401 (MAX_BODY_BYTES, DEFAULT_PORT: read here by callers)
    DEFAULT_PORT,
    MAX_BODY_BYTES,
    REQUEST_TIMEOUT_SECONDS,
    RequestError,
    error,
    process_seconds,
    resident_mib,
)

DEFAULT_MODEL_NAME = "model"  # TF Serving's MODEL_NAME default
# Model calls at once: TensorFlow spreads each call over the cores already, so more than one
# per core only adds latency; past it, requests queue (web.Workers).
MODEL_WORKERS = max(2, os.cpu_count() or 2)
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


class Holder:
    """The model once loaded; the load runs beside the server so /ping can answer 503."""

    def __init__(self, model_dir: str, name: str):
        self.model_dir, self.name = model_dir, name
        self.model: ServedModel | None = None
        self.failure: str | None = None

    def load(self, on_done) -> None:
        started = time.monotonic()
        try:
            self.model = ServedModel(self.model_dir, self.name)
        except Exception as e:  # a model that cannot be served: say why and stop
            self.failure = f"cannot load the model in {self.model_dir}: {e}"
        on_done(self, time.monotonic() - started)


def build_app(holder: Holder, max_body: int = MAX_BODY_BYTES,
              timeout: float = REQUEST_TIMEOUT_SECONDS, workers: int = MODEL_WORKERS,
              queue: float = web.QUEUE_SECONDS) -> Starlette:
    pool = web.Workers(workers, queue)

    async def ping(request: Request) -> Response:
        if holder.model is None:
            return error(503, holder.failure or "the model is still loading")
        return Response(b"", 200)

    async def invocations(request: Request, json_only: bool = False) -> Response:
        model = holder.model
        if model is None:
            return error(503, holder.failure or "the model is still loading; retry after GET /ping returns 200")
        content_type = codec.media_type(request.headers.get("content-type"))
        if json_only and content_type not in codec.JSON_TYPES:
            # TF Serving reads any body as JSON; here only a JSON one: a form or text/plain body
            # is what a web page may POST cross-origin with no preflight.
            return error(415, f"Unsupported Media Type: {content_type}; :predict reads JSON: send "
                              "Content-Type: application/json (curl: -H 'Content-Type: application/json')")
        if content_type not in codec.CONTENT_TYPES:
            return error(415, f"Unsupported Media Type: {content_type}; send one of {', '.join(codec.CONTENT_TYPES)}")
        attributes = request.headers.get(CUSTOM_ATTRIBUTES, "")
        if "tfs-method=" in attributes and "tfs-method=predict" not in attributes:
            return error(400, "only tfs-method=predict is served (classify and regress are not)")
        body = await web.read_body(request, max_body)
        if isinstance(body, Response):
            return body
        try:
            answer = await pool.call(_predict, model, content_type, body, timeout=timeout)
        except RequestError as e:
            return error(e.status, str(e))
        except web.Busy as e:
            return error(503, str(e))
        except asyncio.TimeoutError:
            return error(504, f"the model took more than {timeout:g} s to answer")
        return Response(json.dumps(answer, separators=(",", ":")), 200, media_type=_accept(request))

    async def tf_serving(request: Request) -> Response:
        name, _, verb = request.path_params["spec"].partition(":")
        name, _, rest = name.partition("/")
        if holder.model is None:
            return error(503, holder.failure or "the model is still loading")
        if name != holder.name:
            return error(404, f"Servable not found for request: Latest({name}); this server serves {holder.name!r}")
        rest = _strip_version(rest, holder.model.version)
        if rest is None:
            return error(404, f"model {name} has only version {holder.model.version}")
        if request.method == "GET" and not verb and rest == "":
            return _json(holder.model.status_document())
        if request.method == "GET" and not verb and rest == "metadata":
            return _json(holder.model.metadata_document())
        if request.method == "POST" and verb == "predict" and rest == "":
            return await invocations(request, json_only=True)
        return error(404, f"no route {request.method} {request.url.path}: TF Serving's are GET "
                          f"/v1/models/{holder.name}[/metadata] and POST /v1/models/{holder.name}:predict")

    routes = [
        Route("/ping", ping, methods=["GET"]),
        Route("/invocations", invocations, methods=["POST"]),
        Route("/endpoints/{endpoint}/invocations", invocations, methods=["POST"]),
        Route("/v1/models/{spec:path}", tf_serving, methods=["GET", "POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers=web.EXCEPTION_HANDLERS)
    app.state.workers = pool  # serve() reports how many requests waited for one
    return app


def _predict(model: ServedModel, content_type: str, body: bytes) -> dict:
    request = codec.decode(model, content_type, body)
    return codec.encode(request, model.predict(request.signature, request.inputs))


def _accept(request: Request) -> str:
    """JSON, as SageMaker TFS answers, under the JSON type the client accepts first."""
    for kind in request.headers.get("accept", "").replace(" ", "").split(","):
        if kind in codec.JSON_TYPES:
            return kind
    return "application/json"


def _strip_version(rest: str, version: str) -> str | None:
    if not rest.startswith("versions/"):
        return rest
    asked, _, rest = rest.removeprefix("versions/").partition("/")
    return rest if asked.lstrip("0") == version.lstrip("0") else None


def _json(doc: dict) -> Response:
    return Response(json.dumps(doc), 200, media_type="application/json")


def serve(model_dir: str, host: str, port: int, name: str = DEFAULT_MODEL_NAME,
          access_log: bool = False) -> int:
    holder = Holder(model_dir, name)

    def load(server) -> None:
        def loaded(holder: Holder, seconds: float) -> None:
            if holder.failure:
                print(f"serve: error: {holder.failure}", file=sys.stderr, flush=True)
                server.should_exit = True
                return
            model = holder.model
            print(f"serving {model.path} (version {model.version}; signatures "
                  f"{', '.join(model.signatures)}) on http://{host}:{port} as {name!r}: started in "
                  f"{process_seconds():.1f} s (model {seconds:.1f} s), memory "
                  f"{resident_mib():.0f} MiB resident", flush=True)

        holder.load(loaded)

    app = build_app(holder)
    server = web.run(app, host, port, load, access_log)
    if holder.failure:
        return 1
    if not server.started:
        return 1  # the port was taken: uvicorn said so
    pool = app.state.workers
    print(f"serve: {pool.waited} request(s) waited for one of the {pool.count} model workers", flush=True)
    web.say_stopped()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="<version>/saved_model.pb under it")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--name", default=DEFAULT_MODEL_NAME, help="the TF Serving model name")
    parser.add_argument("--access-log", action="store_true", help="one line per request")
    args = parser.parse_args(argv)
    return serve(args.model_dir, args.host, args.port, args.name, args.access_log)


if __name__ == "__main__":
    sys.exit(main())
