"""serving/server.py over real HTTP: a started server, requests from this process."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import numpy as np
import pytest
import requests

from serving import server as server_module
from tests import readme_record
from tests.serving.conftest import (
    IMAGE_CLASSES,
    TABLE_CLASSES,
    encoded_image,
    free_port,
    start,
    stop,
)

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
# For what takes ms when idle (a fast call's answer, a server acting on a signal): a loaded
# 2-core CI machine may stall a thread or a process for seconds.
GENEROUS_S = 30


@pytest.fixture(scope="module")
def expected(table_model):
    from serving.model import ServedModel

    model = ServedModel(table_model)
    out = model.predict(model.signature(None), {"x": ROWS})
    return out["probabilities"], [c.decode() for c in out["classes"]]


def _check_rows(predictions, expected):
    probabilities, classes = expected
    assert [p["classes"] for p in predictions] == classes
    np.testing.assert_allclose([p["probabilities"] for p in predictions], probabilities, rtol=1e-5)
    assert set(classes) <= set(TABLE_CLASSES)


def test_json_bodies_as_sagemaker_tfs_reads_them(table_server, expected):
    for body in [{"instances": ROWS}, {"instances": [{"x": r} for r in ROWS]},
                 {"instances": ROWS, "signature_name": "serving_default"}, ROWS]:
        answer = table_server.post("/invocations", json.dumps(body))
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        _check_rows(answer.json()["predictions"], expected)
    lines = "\n".join(json.dumps(r) for r in ROWS)
    _check_rows(table_server.post("/invocations", lines, "application/jsonlines").json()["predictions"], expected)
    columnar = table_server.post("/invocations", json.dumps({"inputs": {"x": ROWS}})).json()["outputs"]
    assert columnar["classes"] == expected[1]
    single = table_server.post("/invocations", json.dumps(ROWS[0])).json()["predictions"]
    assert len(single) == 1 and single[0]["classes"] == expected[1][0]


def test_csv_rows_with_or_without_a_header(table_server, expected):
    body = "\n".join(",".join(map(str, r)) for r in ROWS)
    for text in [body, "a,b,c,d\n" + body + "\n"]:
        answer = table_server.post("/invocations", text, "text/csv; charset=utf-8")
        assert answer.status_code == 200, answer.text
        _check_rows(answer.json()["predictions"], expected)


def test_images_as_bytes_and_as_b64_json(image_server):
    png, jpeg = encoded_image("png"), encoded_image("jpeg", 1)
    answers = [image_server.post("/invocations", png, "image/png"),
               image_server.post("/invocations", jpeg, "image/jpeg"),
               image_server.post("/invocations", png, "application/x-image")]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        (row,) = answer.json()["predictions"]
        assert row["classes"] in IMAGE_CLASSES and abs(sum(row["probabilities"]) - 1) < 1e-5
    b64 = {"instances": [{"b64": base64.b64encode(png).decode()}, {"b64": base64.b64encode(jpeg).decode()}]}
    rows = image_server.post("/invocations", json.dumps(b64)).json()["predictions"]
    assert [r["classes"] for r in rows] == [answers[0].json()["predictions"][0]["classes"],
                                             answers[1].json()["predictions"][0]["classes"]]
    pixels = np.zeros((1, 32, 32, 3)).tolist()
    by_float = image_server.post("/invocations", json.dumps({"instances": pixels}))
    assert by_float.status_code == 200 and by_float.json()["predictions"][0]["classes"] in IMAGE_CLASSES


@pytest.mark.parametrize("body, content_type, status, words", [
    ('{"instances": [[1, 2', "application/json", 400, "malformed JSON"),
    ('{"instances": [[1, 2, 3]]}', "application/json", 400, "has shape [1, 3]; the model takes serving_default(x: float32 [None, 4])"),
    ('{"instances": [[1, 2, 3, 4], [1]]}', "application/json", 400, "not a regular array"),
    ('{"instances": [[1, 2, 3, 4]], "signature_name": "nope"}', "application/json", 400, "unknown signature_name 'nope'"),
    ('{"instances": []}', "application/json", 400, "'instances' is empty"),
    ('{"instances": [{"y": [1, 2, 3, 4]}]}', "application/json", 400, "lacks ['x']"),
    ("1,2,3\n", "text/csv", 400, "CSV row 1 has 3 values; the model takes 4"),
    ("1,2,3,4\n1,x,3,4\n", "text/csv", 400, "CSV row 2 holds a value that is not a number"),
    ("<a/>", "application/xml", 415, "Unsupported Media Type: application/xml"),
    ("xx", "image/png", 415, "image/png is for image models"),
])
def test_bad_requests_get_one_line_json_errors_and_the_server_keeps_serving(table_server, body, content_type, status, words):
    answer = table_server.post("/invocations", body, content_type)
    assert answer.status_code == status
    assert "\n" not in answer.text and words in answer.json()["error"]
    assert table_server.post("/invocations", json.dumps({"instances": ROWS})).status_code == 200


def test_image_errors(image_server):
    answer = image_server.post("/invocations", b"not an image at all", "image/jpeg")
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("the bytes are not an image the model can read")
    assert image_server.post("/invocations", json.dumps({"instances": [{"b64": "!!"}]})).status_code == 400
    assert image_server.post("/invocations", "1,2\n", "text/csv").status_code == 415


def test_an_image_declaring_more_pixels_than_the_limit_is_a_413_before_it_is_decoded(image_server):
    """A decompression bomb: a 35 KB PNG of 6000 x 6000 grey pixels (108 MB decoded, four
    times that as float32), refused by the exported graph from its header alone."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    rows = b"".join(packer.compress(b"\0" * 6001) for _ in range(6000)) + packer.flush()
    bomb = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 6000, 6000, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
    assert len(bomb) < 64 * 1024
    for answer in (image_server.post("/invocations", bomb, "image/png"),
                   image_server.post("/invocations", json.dumps({"instances": [{"b64": base64.b64encode(bomb).decode()}]}))):
        readme_record.record(answer.json()["error"])
        assert answer.status_code == 413
        assert answer.json()["error"] == ("the image is 6000 x 6000 pixels, over the serving limit of 25000000 "
                                          "(MAX_SERVING_PIXELS); resize it before sending")
    assert image_server.post("/invocations", encoded_image("png"), "image/png").status_code == 200


def test_a_png_whose_header_is_garbage_is_a_400_not_a_size(image_server):
    import struct

    # The signature, then a chunk that is no IHDR, whose bytes read as 100000 x 100000 pixels.
    garbage = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\x0dJUNK" + struct.pack(">II", 100_000, 100_000) + b"\x07" * 64
    answer = image_server.post("/invocations", garbage, "image/png")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    readme_record.record(error)
    assert error.startswith("the bytes are not an image the model can read (JPEG, PNG, GIF or BMP): ")
    assert "pixels" not in error


def test_body_limit_routes_and_methods(table_server):
    big = b"[" + b"0," * (3 * 2**20) + b"0]"
    answer = table_server.post("/invocations", big)
    assert answer.status_code == 413 and "6 MB" in answer.json()["error"]
    assert requests.get(table_server.url + "/invocations", timeout=10).status_code == 405
    assert requests.get(table_server.url + "/nowhere", timeout=10).json()["error"].startswith("Not Found")


def test_tf_serving_rest_paths(table_server, expected):
    status = requests.get(table_server.url + "/v1/models/model", timeout=10).json()
    assert status["model_version_status"][0]["state"] == "AVAILABLE"
    metadata = requests.get(table_server.url + "/v1/models/model/metadata", timeout=10).json()
    signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["x"]["dtype"] == "DT_FLOAT"
    assert set(signature["outputs"]) == {"probabilities", "classes"}
    answer = table_server.post("/v1/models/model:predict", json.dumps({"instances": ROWS}))
    _check_rows(answer.json()["predictions"], expected)
    assert table_server.post("/v1/models/model/versions/1:predict", json.dumps({"instances": ROWS})).status_code == 200
    assert table_server.post("/v1/models/other:predict", "{}").status_code == 404


def test_boto3_invoke_endpoint_and_the_sdk_predictor(table_server, expected):
    runtime = boto3.client("sagemaker-runtime", endpoint_url=table_server.url, region_name="us-east-1")
    answer = runtime.invoke_endpoint(EndpointName="local", ContentType="text/csv", Accept="application/json",
                                     Body="\n".join(",".join(map(str, r)) for r in ROWS))
    _check_rows(json.loads(answer["Body"].read())["predictions"], expected)

    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.predictor import Predictor
    from sagemaker.serializers import JSONSerializer
    from sagemaker.session import Session

    session = Session(boto_session=boto3.Session(region_name="us-east-1"), sagemaker_runtime_client=runtime)
    predictor = Predictor("local", sagemaker_session=session, serializer=JSONSerializer(),
                          deserializer=JSONDeserializer())
    _check_rows(predictor.predict({"instances": ROWS})["predictions"], expected)


def test_concurrent_clients_get_their_own_answers(table_server):
    rng = np.random.default_rng(5)
    bodies = [rng.uniform(0, 8, (n % 5 + 1, 4)).round(3).tolist() for n in range(64)]
    with requests.Session() as alone:
        wanted = [alone.post(table_server.url + "/invocations", json=dict(instances=b), timeout=30).json() for b in bodies]

    def ask(i):
        return requests.post(table_server.url + "/invocations", json={"instances": bodies[i]}, timeout=30).json()

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(ask, range(len(bodies)))) == wanted


def test_ping_is_503_until_the_model_is_loaded():
    holder = server_module.Holder("/nowhere", "model")
    app = server_module.build_app(holder)
    ping = next(r for r in app.routes if r.path == "/ping").endpoint
    assert asyncio.run(ping(None)).status_code == 503
    holder.load(lambda *_: None)
    answer = asyncio.run(ping(None))
    assert answer.status_code == 503 and b"does not exist" in answer.body


def _asgi_post(app, path: str, body: bytes) -> tuple[int, dict]:
    """One POST through the whole ASGI app (routing, body read, handler), in this process."""
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 1)}
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]) or b"{}")


def test_a_model_slower_than_the_timeout_is_a_504_and_the_server_keeps_serving(monkeypatch):
    """SageMaker's 60 s per request, shortened: a real wait would be a minute. The 504 comes
    while the slow call still runs (it cannot be stopped), not once it has ended."""
    holder = server_module.Holder("/nowhere", "model")
    holder.model = object()  # loaded, as far as the routes can tell
    release = threading.Event()  # the slow call waits for it: past the timeout, until the test ends
    ended = threading.Event()

    def predict(model, content_type, body):
        if b"slow" in body:
            release.wait(30)
            ended.set()
        return {"predictions": [1]}

    monkeypatch.setattr(server_module, "_predict", predict)
    app = server_module.build_app(holder, timeout=1)
    try:
        status, answer = _asgi_post(app, "/invocations", b'"slow"')
        assert status == 504 and answer == {"error": "the model took more than 1 s to answer"}
        assert not ended.is_set()
        # A fast call answers too (a loaded machine may hold even it past the 1 s: then it asks again).
        deadline = time.monotonic() + GENEROUS_S
        while (fast := _asgi_post(app, "/invocations", b'"fast"')) != (200, {"predictions": [1]}):
            assert fast[0] == 504 and time.monotonic() < deadline, fast
    finally:
        release.set()


def test_slow_calls_hold_only_their_workers_and_the_rest_queue_or_get_503(monkeypatch):
    """Two workers, both held by calls past their time: the next request waits for a worker,
    gets 503 (busy) instead of another thread, and is served once a worker is free."""
    holder = server_module.Holder("/nowhere", "model")
    holder.model = object()
    release = threading.Event()
    started = []

    def predict(model, content_type, body):
        started.append(body)
        if b"slow" in body:
            release.wait(30)
        return {"predictions": [1]}

    monkeypatch.setattr(server_module, "_predict", predict)
    app = server_module.build_app(holder, timeout=0.5, workers=2, queue=0.5)
    try:
        assert [_asgi_post(app, "/invocations", b'"slow"')[0] for _ in range(2)] == [504, 504]
        status, answer = _asgi_post(app, "/invocations", b'"fast"')
        readme_record.record(answer.get("error"))
        assert status == 503 and answer == {"error": (
            "the model is busy: all 2 workers are answering requests, 2 of them past the 0.5 s limit, and "
            "none came free within 0.5 s; retry later")}
        assert started == [b'"slow"', b'"slow"']  # the refused request never ran
    finally:
        release.set()
    deadline = time.monotonic() + 30
    while _asgi_post(app, "/invocations", b'"fast"')[0] != 200:
        assert time.monotonic() < deadline, "the workers never came free"


def test_only_this_servers_names_and_no_web_page_may_call_it(table_server):
    """DNS rebinding (another name for 127.0.0.1), a cross-origin page, and a body a page can
    POST without a preflight are refused before the model runs."""
    body = json.dumps({"instances": ROWS})
    rebound = requests.post(table_server.url + "/invocations", data=body, timeout=30,
                            headers={"Host": "attacker.example:8080", "Content-Type": "application/json"})
    assert rebound.status_code == 400
    readme_record.record(rebound.json()["error"])
    assert rebound.json()["error"].startswith("Host 'attacker.example:8080' is not a name of this server "
                                              "(bound to 127.0.0.1: 127.0.0.1, ::1, localhost)")
    page = requests.post(table_server.url + "/invocations", data=body, timeout=30,
                         headers={"Origin": "http://attacker.example", "Content-Type": "application/json"})
    readme_record.record(page.json()["error"])
    assert page.status_code == 403 and "http://attacker.example is refused" in page.json()["error"]
    for kind in ("text/plain", "application/x-www-form-urlencoded"):
        simple = table_server.post("/v1/models/model:predict", body, kind)
        assert simple.status_code == 415, kind
        readme_record.record(simple.json()["error"])
        assert simple.json()["error"].startswith(f"Unsupported Media Type: {kind}; :predict reads JSON")
    assert table_server.post("/invocations", body, "text/plain").status_code == 415
    local = requests.post(f"http://localhost:{table_server.port}/invocations", data=body, timeout=30,
                          headers={"Content-Type": "application/json", "Origin": f"http://localhost:{table_server.port}"})
    assert local.status_code == 200


@pytest.mark.parametrize("body", ['{"instances": ' + "[" * 50_000 + "]" * 50_000 + "}",
                                  "[" * 50_000 + "]" * 50_000])
def test_json_nested_past_the_parser_is_a_400(table_server, body):
    answer = table_server.post("/invocations", body)
    readme_record.record(answer.json()["error"])
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("the JSON body nests deeper than the parser reads")


def test_a_csv_value_over_the_field_limit_is_a_400(table_server):
    answer = table_server.post("/invocations", "1,2,3,4\n1," + "9" * (200 * 1024) + ",3,4\n", "text/csv")
    readme_record.record(answer.json()["error"])
    assert answer.status_code == 400
    assert answer.json()["error"] == ("CSV row 2: field larger than field limit (131072) (one value over "
                                      "131072 characters); a table row holds numbers")


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_answers_the_request_in_flight_then_exits_0(table_model, stop_signal):
    port = free_port()
    server = start([sys.executable, "-m", "serving.server", "--model-dir", table_model, "--port", str(port)], port)
    body = json.dumps({"instances": ROWS}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        head = f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        conn.sendall(head.encode() + body[:10])  # in flight: half its body sent
        time.sleep(0.3)
        server.process.send_signal(stop_signal)
        deadline = time.monotonic() + GENEROUS_S  # no new connections while draining, once it acts on the signal
        while True:
            try:
                requests.get(server.url + "/ping", timeout=5)
            except requests.ConnectionError:
                break
            except requests.ReadTimeout:  # taken just before the signal, and slow to answer
                pass
            assert time.monotonic() < deadline, "the server still took new connections"
            time.sleep(0.1)
        conn.sendall(body[10:])
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert b'"predictions"' in reply
    code, out = stop(server)
    assert code == 0, out
    assert "serving " in out and "MiB resident" in out and "stopped" in out
