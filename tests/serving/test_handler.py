"""serving/handler.py: a scikit-learn model behind an inference script, over real HTTP (a
started ``python -m serving.handler``), and the toolkit's contract checked in process."""

from __future__ import annotations

import io
import json
import sys
import textwrap
import time
import types

import numpy as np
import pytest
import requests

from serving import handler
from serving.web import RequestError
from tests import readme_record
from tests.serving.conftest import free_port, start, stop

CLASSES = ["setosa", "versicolor", "virginica"]
ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
CSV = "\n".join(",".join(map(str, r)) for r in ROWS)

# The four functions: JSON {"rows": [...]} or CSV in, class names and probabilities out.
FULL_SCRIPT = '''
import io, json, os
import joblib
import numpy as np

def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))

def input_fn(input_data, content_type):
    if content_type == "application/json":
        return np.array(json.loads(input_data)["rows"], dtype=float)
    if content_type == "text/csv":
        return np.loadtxt(io.StringIO(input_data), delimiter=",", ndmin=2)
    raise ValueError(f"unsupported content type {content_type}")

def predict_fn(data, model):
    return {"classes": model.predict(data).tolist(), "probabilities": model.predict_proba(data).tolist()}

def output_fn(prediction, accept):
    return json.dumps(prediction), "application/json"
'''
# Only model_fn, repacked into the model as SageMaker does (model.tar.gz's code/).
DEFAULTS_SCRIPT = '''
import os
import joblib

def model_fn(model_dir, context):
    assert context.system_properties["model_dir"] == model_dir
    return joblib.load(os.path.join(model_dir, "model.joblib"))
'''


@pytest.fixture(scope="module")
def classifier():
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    features, labels = load_iris(return_X_y=True)
    return LogisticRegression(max_iter=500).fit(features, np.array(CLASSES)[labels])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, classifier):
    import joblib

    root = tmp_path_factory.mktemp("sklearn-model")
    joblib.dump(classifier, root / "model.joblib")
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(DEFAULTS_SCRIPT)
    (root / "code" / "requirements.txt").write_text("scikit-learn\n")
    return root


@pytest.fixture(scope="module")
def code_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sourcedir")
    (root / "score.py").write_text(FULL_SCRIPT)
    return root


def _serve(model_dir, *args):
    port = free_port()
    return start([sys.executable, "-m", "serving.handler", "--model-dir", str(model_dir), "--port", str(port),
                  *args], port)


@pytest.fixture(scope="module")
def full_server(model_dir, code_dir):
    server = _serve(model_dir, "--code-dir", str(code_dir), "--program", "score.py")
    yield server
    code, out = stop(server)
    assert code == 0, out
    assert "serving score.py" in out and "MiB resident" in out and "stopped" in out


@pytest.fixture(scope="module")
def defaults_server(model_dir):
    server = _serve(model_dir, "--program", "inference.py")  # its folder: <model-dir>/code
    yield server
    stop(server)


def test_a_script_with_the_four_functions_answers_json_and_csv(full_server, classifier):
    wanted = {"classes": classifier.predict(ROWS).tolist()}
    for body, kind in [(json.dumps({"rows": ROWS}), "application/json"), (CSV, "text/csv")]:
        answer = full_server.post("/invocations", body, kind)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        assert answer.json()["classes"] == wanted["classes"]
        np.testing.assert_allclose(answer.json()["probabilities"], classifier.predict_proba(ROWS), rtol=1e-6)
    runtime = full_server.post("/endpoints/any/invocations", CSV, "text/csv")  # boto3's endpoint_url path
    assert runtime.json()["classes"] == wanted["classes"]


def test_a_script_error_is_one_line_naming_script_and_function_and_the_server_keeps_serving(full_server):
    for body, kind, where in [("{", "application/json", "score.py: input_fn raised JSONDecodeError"),
                              ("x", "text/plain", "score.py: input_fn raised ValueError: unsupported content type"),
                              ("1,2,3", "text/csv", "score.py: predict_fn raised ValueError: X has 3 features")]:
        answer = full_server.post("/invocations", body, kind)
        assert answer.status_code == 500
        assert answer.text.count("\n") == 0 and answer.json()["error"].startswith(where), answer.text
    assert full_server.post("/invocations", CSV, "text/csv").status_code == 200


def test_the_defaults_decode_json_csv_and_npy_and_encode_by_accept(defaults_server, classifier):
    names = classifier.predict(ROWS).tolist()
    assert defaults_server.post("/invocations", json.dumps(ROWS)).json() == names
    assert defaults_server.post("/invocations", CSV, "text/csv").json() == names
    as_csv = requests.post(defaults_server.url + "/invocations", data=CSV, timeout=30,
                           headers={"Content-Type": "text/csv", "Accept": "text/csv"})
    assert as_csv.headers["content-type"].startswith("text/csv") and as_csv.text.split() == names
    npy = io.BytesIO()
    np.save(npy, np.array(ROWS))
    answer = requests.post(defaults_server.url + "/invocations", data=npy.getvalue(), timeout=30,
                           headers={"Content-Type": "application/x-npy", "Accept": "application/x-npy"})
    assert np.load(io.BytesIO(answer.content)).tolist() == names


def test_the_defaults_refusals_are_4xx_and_one_csv_row_is_1d_as_in_the_container(defaults_server):
    refused = defaults_server.post("/invocations", "x", "text/plain")
    assert refused.status_code == 415 and "define input_fn" in refused.json()["error"]
    words = defaults_server.post("/invocations", "a,b\n1,2", "text/csv")
    assert words.status_code == 400 and "reads numbers only" in words.json()["error"]
    accept = requests.post(defaults_server.url + "/invocations", data=CSV, timeout=30,
                           headers={"Content-Type": "text/csv", "Accept": "application/xml"})
    assert accept.status_code == 415 and "define output_fn" in accept.json()["error"]
    one_row = defaults_server.post("/invocations", CSV.splitlines()[0], "text/csv")
    assert one_row.status_code == 500 and "the default predict_fn raised ValueError" in one_row.json()["error"]
    assert "reshape in input_fn" in one_row.json()["error"]
    assert defaults_server.post("/invocations", b"x" * (6 * 2**20 + 1), "text/csv").status_code == 413
    missing = requests.get(defaults_server.url + "/nowhere", timeout=30)
    assert missing.status_code == 404 and "error" in missing.json()
    assert defaults_server.post("/invocations", CSV, "text/csv").status_code == 200


def _module(source: str) -> types.ModuleType:
    module = types.ModuleType("script")
    exec(textwrap.dedent(source), module.__dict__)
    return module


def test_transform_fn_replaces_the_three_and_receives_the_context(tmp_path):
    script = handler.Script(_module('''
        def model_fn(model_dir):
            return "m"
        def transform_fn(model, data, content_type, accept, context):
            return f"{model}|{data}|{content_type}|{accept}|{context.system_properties['model_dir']}"
        '''), "t.py", tmp_path)
    script.load_model()
    assert script.invoke(b"1,2", "text/csv", "text/csv") == (f"m|1,2|text/csv|text/csv|{tmp_path}".encode(), "text/csv")


@pytest.mark.parametrize("source, message", [
    ("x = 1", "t.py defines no model_fn(model_dir)"),
    ("def model_fn(d): pass\ndef transform_fn(m, d, c, a): pass\ndef input_fn(d, c): pass",
     "t.py defines transform_fn and also input_fn"),
    ("def input_handler(data, context): pass", "t.py defines input_handler: TensorFlow Serving's"),
])
def test_scripts_the_contract_refuses_are_one_line(tmp_path, source, message):
    with pytest.raises(handler.LoadError, match=message.replace("(", r"\(").replace(")", r"\)")):
        handler.Script(_module(source), "t.py", tmp_path)


def test_a_function_with_the_wrong_arity_and_an_output_that_is_not_bytes_are_named(tmp_path):
    script = handler.Script(_module('''
        def model_fn(model_dir):
            return None
        def input_fn(data):
            return data
        '''), "t.py", tmp_path)
    with pytest.raises(handler.ScriptError, match=r"t.py: input_fn takes 1 argument\(s\); the toolkit passes 2"):
        script.invoke(b"[1]", "application/json", "application/json")
    listed = handler.Script(_module("def model_fn(d): pass\ndef transform_fn(m, d, c, a): return [1]"), "t.py", tmp_path)
    with pytest.raises(handler.ScriptError, match="transform_fn returned a list; return bytes or str"):
        listed.invoke(b"[1]", "application/json", "application/json")


def test_loading_names_the_missing_script_and_the_failing_model_fn(tmp_path):
    holder = handler.Holder(str(tmp_path), str(tmp_path), "inference.py")
    holder.load()
    assert holder.failure == f"the inference script inference.py is not in {tmp_path} (no Python files there)"
    (tmp_path / "inference.py").write_text("import nowhere_such_module\n")
    (tmp_path / "requirements.txt").write_text("nowhere-such-module==1.0\nnumpy>=1\n")
    holder = handler.Holder(str(tmp_path), str(tmp_path), "inference.py")
    holder.load()
    assert holder.failure.startswith("inference.py: importing it raised ModuleNotFoundError")
    assert "requirements.txt is not installed locally" in holder.failure
    assert holder.unmet == ["nowhere-such-module==1.0"]
    (tmp_path / "inference.py").write_text("def model_fn(model_dir):\n    raise FileNotFoundError('model.joblib')\n")
    holder = handler.Holder(str(tmp_path), str(tmp_path), "inference.py")
    holder.load()
    assert holder.failure == "inference.py: model_fn raised FileNotFoundError: model.joblib"


def test_the_script_folder_follows_sagemaker_submit_directory(tmp_path):
    model = tmp_path / "model"
    assert handler.code_dir_of(model, None, {}) == model / "code"
    assert handler.code_dir_of(model, None, {"SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code"}) == model / "code"
    assert handler.code_dir_of(model, None, {"SAGEMAKER_SUBMIT_DIRECTORY": "file:///src"}).as_posix() == "/src"
    assert handler.code_dir_of(model, "/given", {"SAGEMAKER_SUBMIT_DIRECTORY": "s3://b/k"}).as_posix() == "/given"
    with pytest.raises(handler.LoadError, match="is in S3: unpack it and pass --code-dir"):
        handler.code_dir_of(model, None, {"SAGEMAKER_SUBMIT_DIRECTORY": "s3://b/sourcedir.tar.gz"})


def test_default_decoding_and_encoding():
    np.testing.assert_array_equal(handler.default_input_fn("1,2\n3,4", "text/csv; charset=utf-8"), [[1, 2], [3, 4]])
    assert handler.default_input_fn("1,2", "text/csv").shape == (2,)  # squeezed, as the container does
    assert handler.default_input_fn("[[1, 2]]", "application/json").dtype == np.float32
    assert handler.encode(np.array([1, 2]), "*/*") == (b"[1, 2]", "application/json")
    assert handler.encode(np.array([[1, 2]]), "text/html, text/csv;q=0.9") == (b"1,2\n", "text/csv")
    with pytest.raises(RequestError, match="not JSON"):
        handler.default_input_fn("{", "application/json")


def test_pre_model_fn_and_model_warmup_fn_run_around_model_fn(tmp_path):
    module = _module('''
        calls = []
        def pre_model_fn(model_dir):
            calls.append("pre")
        def model_fn(model_dir):
            calls.append("model")
            return "m"
        def model_warmup_fn(model_dir, model):
            calls.append(f"warmup {model}")
        ''')
    handler.Script(module, "t.py", tmp_path).load_model()
    assert module.calls == ["pre", "model", "warmup m"]


def test_the_server_timeout_follows_sagemaker_model_server_timeout():
    assert handler.server_timeout({}) == 60
    assert handler.server_timeout({"SAGEMAKER_MODEL_SERVER_TIMEOUT": "600"}) == 600
    with pytest.raises(SystemExit, match="SAGEMAKER_MODEL_SERVER_TIMEOUT='soon' is not a number"):
        handler.server_timeout({"SAGEMAKER_MODEL_SERVER_TIMEOUT": "soon"})


def test_the_defaults_refuse_deep_json_and_a_huge_csv_value_with_a_400(defaults_server):
    deep = defaults_server.post("/invocations", "[" * 50_000 + "]" * 50_000)
    assert deep.status_code == 400 and deep.json()["error"].startswith(
        "the JSON body nests deeper than the parser reads")
    wide = defaults_server.post("/invocations", "1," + "9" * (200 * 1024), "text/csv")
    readme_record.record(deep.json()["error"])
    readme_record.record(wide.json()["error"])
    assert wide.status_code == 400 and wide.json()["error"] == (
        "the CSV body is not one the default input_fn reads: field larger than field limit (131072) (one "
        "value over 131072 characters); send rows of numbers")


@pytest.mark.slow
def test_a_stalled_client_gets_a_408_and_sigterm_then_stops_and_says_so_in_a_redirected_log(
        model_dir, tmp_path):
    """Bound to 0.0.0.0 (warned), a client stalled halfway through its body: the server answers
    it 408 once BODY_READ_SECONDS pass, so SIGTERM's drain ends by itself, and the last line
    reaches the log file. ~20 s: the body limit is not shortened here, as a user meets it."""
    import signal
    import socket
    import subprocess

    from serving import web
    from tests.serving.conftest import ROOT

    port = free_port()
    log = tmp_path / "serve.log"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "serving.handler", "--model-dir", str(model_dir),
                                    "--program", "inference.py", "--host", "0.0.0.0", "--port", str(port)],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "serving inference.py" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port), timeout=web.BODY_READ_SECONDS + 30) as conn:
            conn.sendall(b"POST /invocations HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/csv\r\n"
                         b"Content-Length: 1000\r\n\r\n1,2,")  # then nothing more
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert b"did not arrive within 15 s (4 bytes came)" in reply
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log.read_text()
    readme_record.record(text)
    readme_record.record(reply.decode(errors="replace").split("\r\n\r\n", 1)[-1])
    assert "serve: warning: listening on 0.0.0.0: every machine that can reach this one can call the model" in text
    assert text.rstrip().endswith("serve: stopped (requests in flight answered)"), text[-500:]


def test_a_script_past_its_time_holds_the_one_worker_and_the_next_request_gets_503(tmp_path):
    """The script runs one call at a time: a call past its time keeps the worker until it
    returns, and a request behind it is told the server is busy instead of waiting forever."""
    import asyncio
    import threading

    release = threading.Event()
    module = _module("""
        def model_fn(model_dir):
            return None

        def transform_fn(model, data, content_type, accept):
            if data == b"slow":  # text/plain: bytes, as the toolkit hands it
                RELEASE.wait(30)
            return "ok", "text/plain"
        """)
    module.RELEASE = release
    holder = handler.Holder(str(tmp_path), None, "inference.py")
    holder.script = handler.Script(module, "inference.py", tmp_path)
    app = handler.build_app(holder, timeout=0.3, queue=0.3)

    def post(body: bytes) -> int:
        scope = {"type": "http", "method": "POST", "path": "/invocations", "raw_path": b"/invocations",
                 "query_string": b"", "headers": [(b"content-type", b"text/plain")], "http_version": "1.1",
                 "scheme": "http", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 1)}
        sent = []

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            sent.append(message)

        asyncio.run(app(scope, receive, send))
        return sent[0]["status"]

    try:
        assert post(b"slow") == 504
        assert post(b"fast") == 503
    finally:
        release.set()
    deadline = time.monotonic() + 30
    while post(b"fast") != 200:
        assert time.monotonic() < deadline


def test_a_script_stuck_past_its_time_does_not_hold_the_server_after_sigterm(tmp_path, monkeypatch):
    """The call answered 504 runs on (Python cannot stop it); SIGTERM still ends the server:
    its worker thread does not keep the interpreter from exiting."""
    import signal

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "stuck.py").write_text(textwrap.dedent("""
        import time

        def model_fn(model_dir):
            return None

        def transform_fn(model, data, content_type, accept):
            time.sleep(600)
        """))
    port = free_port()
    monkeypatch.setenv("SAGEMAKER_MODEL_SERVER_TIMEOUT", "1")
    server = start([sys.executable, "-m", "serving.handler", "--model-dir", str(tmp_path), "--program",
                    "stuck.py", "--port", str(port)], port)
    try:
        answer = server.post("/invocations", "1", "text/csv")
        assert answer.status_code == 504 and answer.json()["error"] == "the model took more than 1 s to answer"
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 0
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert "serve: stopped" in server.process.stdout.read()


def test_requests_past_the_cap_get_a_503_until_some_close_and_headerless_connections_do_not_count(defaults_server):
    """uvicorn's limit_concurrency (web.MAX_CONNECTIONS): 64 requests held open (their headers
    sent, their bodies not), and the next request is answered 503 at once instead of one more
    held. Connections that have sent no complete headers are not counted (serving/connections.py):
    64 of them turn no request away."""
    import socket

    from serving import web

    port = defaults_server.port
    headerless = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(web.MAX_CONNECTIONS)]
    try:
        time.sleep(0.5)  # every connection accepted by the server
        assert defaults_server.post("/invocations", CSV, "text/csv").status_code == 200
    finally:
        for conn in headerless:
            conn.close()
    held = []
    for _ in range(web.MAX_CONNECTIONS):
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        conn.sendall(b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/csv\r\n"
                     b"Content-Length: 100\r\n\r\n1,")
        held.append(conn)
    try:
        time.sleep(0.5)
        assert defaults_server.post("/invocations", CSV, "text/csv").status_code == 503
    finally:
        for conn in held:
            conn.close()
    deadline = time.monotonic() + 30
    while defaults_server.post("/invocations", CSV, "text/csv").status_code != 200:
        assert time.monotonic() < deadline
