"""``trainpipe serve`` under load: latency and throughput, then two bounded load tests.

    .venv/bin/python -m benchmarks.serving.serve_load                      # what make bench runs
    .venv/bin/python -m benchmarks.serving.serve_load --requests 600 --clients 4 --latency-requests 40

Latency: the digits MLP (64 features, 10 classes) answering JSON ``{"instances": [row]}`` and
the small CNN (32 px) answering one PNG as ``image/png``, each from 1 and 8 concurrent clients
(keep-alive sessions): p50, p99 and requests/s. Load: ``--requests`` from ``--clients``
clients against the MLP, every ``--malformed-every``-th one malformed (bad JSON, the wrong
width, an unknown signature, an unknown content type, bytes that are not numbers); every
well-formed answer is checked against the model's own output, every malformed one must be
a 4xx with a one-line JSON error, and the server's resident memory is sampled throughout
(after one request of each shape, so that start-up allocations are not counted as growth).
Hostile load (``--hostile-requests``, issue 35): the same number of requests against the
image CNN, mixing small PNGs (checked against the model's own output), slow requests (16
large images in one JSON body), oversized images (a 35 KB PNG declaring 6000 x 6000 pixels:
413) and malformed bodies, while ``--stalled`` raw connections send half a body and stop (408
after ``web.BODY_READ_SECONDS``, then again), ``--stalled-headers`` (issue 48: 70, past
``web.MAX_CONNECTIONS``) send their headers a byte a second and never end them (408 after
``connections.HEADER_SECONDS``, then again), and /ping is asked four times a second
throughout (target: 200 every time). Reported: 5xx (target 0), the server's resident
memory peak, the small requests' p99, the requests the server says waited for a model worker,
and the small requests that ran while a slow one did and took longer than the p99 of those
that did not ("waited behind a slow one").
The server is ``python -m serving.server`` on 127.0.0.1, a process of its own, as
``trainpipe serve`` runs it; every request goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psutil
import requests

from benchmarks import harness as h

MALFORMED = [
    (b'{"instances": [[1, 2', "application/json"),
    (b'{"instances": [[1, 2, 3]]}', "application/json"),
    (b'{"instances": [[0]], "signature_name": "nope"}', "application/json"),
    (b"<xml/>", "application/xml"),
    (b"a,b\nx,y\n", "text/csv"),
]


def save_digits_mlp(model_dir) -> np.ndarray:
    """The digits MLP (64 features, classes "digit 0".."digit 9") fitted one epoch, saved as
    training saves it (``<model_dir>/1``); returns the digits rows. benchmarks/serving/transform.py's
    model too."""
    import tensorflow as tf

    from training_entry.model import network

    x, y = h.digits_arrays()
    tf.keras.utils.set_random_seed(0)
    mlp = network.build_model(64, 10, x.mean(axis=0), x.std(axis=0) + 1e-6)
    mlp.compile("adam", "sparse_categorical_crossentropy")
    mlp.fit(x, y, epochs=1, batch_size=64, verbose=0)
    network.save_for_serving(mlp, str(model_dir), "1", class_names=[f"digit {i}" for i in range(10)])
    return x


def _models(work) -> tuple[str, str, np.ndarray]:
    """(MLP folder, CNN folder, digits rows)."""
    from training_entry.model import architectures, network

    x = save_digits_mlp(work / "mlp")
    network.save_for_serving(architectures.small_cnn(32, 10), str(work / "cnn"), "1", 32)
    return str(work / "mlp"), str(work / "cnn"), x


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _server(model_dir: str, said: list | None = None):
    """(url, process) of a started server; ``said`` gets its output lines once it stops."""
    port = _free_port()
    process = subprocess.Popen([h.PYTHON, "-m", "serving.server", "--model-dir", model_dir, "--port", str(port)],
                               cwd=h.REPO, env=h.quiet_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(url + "/ping", timeout=5).status_code == 200:
                    break
            if process.poll() is not None:
                raise RuntimeError(process.stdout.read())
            time.sleep(0.1)
        yield url, process
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=120)
        if said is not None:
            said.extend(out.splitlines())
        h.say("  server: " + " | ".join(line for line in out.splitlines() if line.startswith(("serving", "serve"))))


def _latency(url: str, body: bytes, content_type: str, clients: int, requests_each: int) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, requests/s) of ``clients`` sessions sending ``body``."""
    times: list[float] = []
    lock = threading.Lock()

    def client(_):
        with requests.Session() as session:
            for _ in range(requests_each):
                started = time.perf_counter()
                answer = session.post(url + "/invocations", data=body, headers={"Content-Type": content_type}, timeout=60)
                answer.raise_for_status()
                with lock:
                    times.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    wall = time.perf_counter() - started
    ms = np.array(times) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), len(times) / wall


def latency(mlp: str, cnn: str, rows: np.ndarray, requests_each: int) -> None:
    import tensorflow as tf

    png = tf.io.encode_png(rows[0].reshape(8, 8, 1).astype(np.uint8) * 16).numpy()
    cases = [("mlp_json", mlp, json.dumps({"instances": [rows[0].tolist()]}).encode(), "application/json"),
             ("cnn_png", cnn, png, "image/png")]
    for name, model_dir, body, content_type in cases:
        with _server(model_dir) as (url, _):
            _latency(url, body, content_type, 1, 5)  # warm the graph
            for clients in (1, 8):
                p50, p99, rps = _latency(url, body, content_type, clients, requests_each)
                h.say(f"{name}, {clients} client(s): p50 {p50:.2f} ms, p99 {p99:.2f} ms, {rps:.0f} requests/s")
                h.result(f"serve_{name}_c{clients}_p50_ms", p50, "-")
                h.result(f"serve_{name}_c{clients}_p99_ms", p99, "-")
                h.result(f"serve_{name}_c{clients}_rps", rps, "-")


def load(mlp: str, rows: np.ndarray, total: int, clients: int, malformed_every: int) -> None:
    from serving.model import ServedModel

    model = ServedModel(mlp)
    pool = [rows[i : i + 1 + i % 4] for i in range(64)]
    expected = []
    for batch in pool:
        out = model.predict(model.signature(None), {"x": batch.tolist()})
        expected.append((out["probabilities"], [c.decode() for c in out["classes"]]))
    counts = {"ok": 0, "wrong": 0, "5xx": 0, "bad_4xx": 0, "bad_not_4xx": 0, "no_answer": 0}
    lock = threading.Lock()
    with _server(mlp) as (url, process):
        server = psutil.Process(process.pid)
        rss: list[float] = []
        done = threading.Event()
        # Every request shape once before memory is sampled: the first call of each batch size
        # traces and allocates, which is start-up, not growth under load.
        with requests.Session() as session:
            for batch in pool[:4]:
                session.post(url + "/invocations", json={"instances": batch.tolist()}, timeout=60)
            for body, content_type in MALFORMED:
                session.post(url + "/invocations", data=body, headers={"Content-Type": content_type}, timeout=60)

        def sample():
            while not done.wait(0.2):
                rss.append(server.memory_info().rss / 2**20)

        def ask(session: requests.Session, n: int) -> str:
            if malformed_every and n % malformed_every == malformed_every - 1:
                body, content_type = MALFORMED[n // malformed_every % len(MALFORMED)]
                answer = session.post(url + "/invocations", data=body, headers={"Content-Type": content_type}, timeout=60)
                return "5xx" if answer.status_code >= 500 else "bad_4xx" if _refused(answer) else "bad_not_4xx"
            i = n % len(pool)
            answer = session.post(url + "/invocations", json={"instances": pool[i].tolist()}, timeout=60)
            return "5xx" if answer.status_code >= 500 else "ok" if _right(answer, expected[i]) else "wrong"

        def client(offset: int):
            with requests.Session() as session:
                for n in range(offset, total, clients):
                    try:
                        key = ask(session, n)
                    except requests.RequestException:  # a dropped connection or a timeout
                        key = "no_answer"
                    with lock:
                        counts[key] += 1

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as executor:
            list(executor.map(client, range(clients)))
        wall = time.perf_counter() - started
        done.set()
    tenth = max(1, len(rss) // 10)
    growth = (np.median(rss[-tenth:]) - np.median(rss[:tenth])) if rss else float("nan")
    h.say(f"load: {total} requests from {clients} clients in {wall:.1f} s ({total / wall:.0f}/s): {counts}; "
          f"server RSS {min(rss, default=0):.0f}..{max(rss, default=0):.0f} MiB, first-to-last tenth {growth:+.1f} MiB")
    h.result("serve_load_5xx", counts["5xx"], "<=0")
    h.result("serve_load_wrong_or_unanswered", total - counts["ok"] - counts["bad_4xx"], "<=0")
    h.result("serve_load_rps", total / wall, "-")
    h.result("serve_load_rss_growth_mib", growth, "<=50")  # a maximum: the writer reads "<=" as one


def _grey_png(side: int) -> bytes:
    """A valid grey PNG of ``side`` x ``side`` zero pixels, a few tens of KB however large."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    rows = b"".join(packer.compress(b"\0" * (side + 1)) for _ in range(side)) + packer.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


def _close(got, wanted) -> bool:
    """JSON answers equal, numbers within float noise."""
    if isinstance(wanted, dict):
        return isinstance(got, dict) and got.keys() == wanted.keys() and all(_close(got[k], wanted[k]) for k in wanted)
    if isinstance(wanted, list):
        return isinstance(got, list) and len(got) == len(wanted) and all(map(_close, got, wanted))
    if isinstance(wanted, float):
        return isinstance(got, (int, float)) and abs(got - wanted) <= 1e-5
    return got == wanted


def _stall(url: str, stop: threading.Event, counts: dict, lock: threading.Lock) -> None:
    """Half a body, then nothing, until the server answers; again until ``stop``."""
    host, port = url.removeprefix("http://").split(":")
    head = (f"POST /invocations HTTP/1.1\r\nHost: {host}\r\nContent-Type: image/png\r\n"
            f"Content-Length: {4 << 20}\r\n\r\n").encode()
    while not stop.is_set():
        try:
            with socket.create_connection((host, int(port)), timeout=120) as conn:
                conn.sendall(head + b"\0" * (2 << 20))
                reply = conn.recv(65536)
            key = "stalled_408" if reply.startswith(b"HTTP/1.1 408") else "5xx" if reply[9:10] == b"5" else "wrong"
        except OSError:
            key = "no_answer"
        with lock:
            counts[key] += 1


def _stall_headers(url: str, stop: threading.Event, counts: dict, lock: threading.Lock) -> None:
    """A request line and part of a header, then one byte a second and never the end of the
    headers, until the server answers (408 at ``connections.HEADER_SECONDS``); again until
    ``stop``. Each connection is bounded: 120 bytes (2 minutes) at most."""
    host, port = url.removeprefix("http://").split(":")
    start = f"POST /invocations HTTP/1.1\r\nHost: {host}\r\nContent-Type: image/png\r\nX-Slow: ".encode()
    while not stop.is_set():
        reply = b""
        try:
            with socket.create_connection((host, int(port)), timeout=10) as conn:
                conn.sendall(start)
                conn.settimeout(1)
                for _ in range(120):
                    try:
                        reply = conn.recv(65536)
                        break
                    except TimeoutError:
                        conn.sendall(b"a")
            key = ("headers_408" if reply.startswith(b"HTTP/1.1 408") else "5xx" if reply[9:10] == b"5"
                   else "wrong")
        except OSError:
            key = "no_answer"
        with lock:
            counts[key] += 1


def _watch_ping(url: str, stop: threading.Event, pings: list) -> None:
    """/ping four times a second (what a load balancer's health check does), its status or 0."""
    with requests.Session() as session:
        while not stop.wait(0.25):
            try:
                pings.append(session.get(url + "/ping", timeout=5).status_code)
            except requests.RequestException:
                pings.append(0)


def hostile(cnn: str, total: int, clients: int, stalled: int, stalled_headers: int = 0) -> None:
    import base64

    import tensorflow as tf

    from serving import codec
    from serving.model import ServedModel
    from training_entry import contract

    rng = np.random.default_rng(0)
    small = [tf.io.encode_png(rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)).numpy() for _ in range(8)]
    model = ServedModel(cnn)
    signature = model.signature(contract.SIGNATURE_BYTES)
    expected = []
    for png in small:
        request = codec.Request(signature, {contract.SERVING_INPUT_IMAGE_BYTES: [png]}, row_format=True)
        expected.append(json.loads(json.dumps(codec.encode(request, model.predict(signature, request.inputs)))))
    big = base64.b64encode(_grey_png(1500)).decode()
    slow_body = json.dumps({"instances": [{"b64": big}] * 16}).encode()
    bomb = _grey_png(6000)
    malformed = [(b'{"instances": [[1, 2', "application/json"), (b"<xml/>", "application/xml"),
                 (b"not an image at all", "image/png"), (b"1,2\n", "text/csv")]
    counts = {k: 0 for k in ("ok", "slow_ok", "oversized_413", "bad_4xx", "stalled_408", "headers_408", "5xx",
                             "wrong", "no_answer")}
    pings: list[int] = []
    lock = threading.Lock()
    small_times: list[tuple[float, float]] = []  # (start, end) of each small request
    slow_spans: list[tuple[float, float]] = []
    said: list[str] = []
    with _server(cnn, said) as (url, process):
        server = psutil.Process(process.pid)
        with requests.Session() as session:  # every shape once: start-up, not load
            session.post(url + "/invocations", data=small[0], headers={"Content-Type": "image/png"}, timeout=60)
            session.post(url + "/invocations", data=slow_body, headers={"Content-Type": "application/json"}, timeout=60)
        rss: list[float] = []
        stop = threading.Event()

        def sample():
            while not stop.wait(0.2):
                rss.append(server.memory_info().rss / 2**20)

        def ask(session: requests.Session, n: int) -> str:
            post = lambda body, kind: session.post(url + "/invocations", data=body, headers={"Content-Type": kind},  # noqa: E731
                                                   timeout=60)
            if n % 50 == 49:
                started = time.perf_counter()
                answer = post(slow_body, "application/json")
                with lock:
                    slow_spans.append((started, time.perf_counter()))
                ok = answer.status_code == 200 and len(answer.json()["predictions"]) == 16
                return "5xx" if answer.status_code >= 500 else "slow_ok" if ok else "wrong"
            if n % 25 == 24:
                answer = post(bomb, "image/png")
                return "5xx" if answer.status_code >= 500 else "oversized_413" if (
                    answer.status_code == 413 and _refused(answer)) else "wrong"
            if n % 10 == 9:
                body, kind = malformed[n // 10 % len(malformed)]
                answer = post(body, kind)
                return "5xx" if answer.status_code >= 500 else "bad_4xx" if _refused(answer) else "wrong"
            started = time.perf_counter()
            answer = post(small[n % len(small)], "image/png")
            with lock:
                small_times.append((started, time.perf_counter()))
            if answer.status_code >= 500:
                return "5xx"
            return "ok" if answer.status_code == 200 and _close(answer.json(), expected[n % len(small)]) else "wrong"

        def client(offset: int):
            with requests.Session() as session:
                for n in range(offset, total, clients):
                    try:
                        key = ask(session, n)
                    except requests.RequestException:
                        key = "no_answer"
                    with lock:
                        counts[key] += 1

        threads = [threading.Thread(target=sample, daemon=True)]
        threads += [threading.Thread(target=_stall, args=(url, stop, counts, lock), daemon=True) for _ in range(stalled)]
        threads += [threading.Thread(target=_stall_headers, args=(url, stop, counts, lock), daemon=True)
                    for _ in range(stalled_headers)]
        threads.append(threading.Thread(target=_watch_ping, args=(url, stop, pings), daemon=True))
        for thread in threads:
            thread.start()
        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as executor:
            list(executor.map(client, range(clients)))
        wall = time.perf_counter() - started
        stop.set()
        for thread in threads[1:]:
            thread.join(timeout=120)  # each stalled connection ends with its 408
    waited = next((int(line.split()[1]) for line in said if line.startswith("serve: ") and "waited" in line), -1)
    during = [(a, b) for a, b in small_times if any(a < end and b > start for start, end in slow_spans)]
    alone = [b - a for a, b in small_times if (a, b) not in set(during)]
    alone_p99 = float(np.percentile(alone, 99)) if alone else float("nan")
    behind = sum(1 for a, b in during if b - a > alone_p99)
    p99 = float(np.percentile([b - a for a, b in small_times], 99)) * 1000 if small_times else float("nan")
    h.say(f"hostile load: {total} requests from {clients} clients, {stalled} connection(s) stalled mid-body and "
          f"{stalled_headers} mid-headers in {wall:.1f} s: {counts}; /ping {len(pings)} time(s), "
          f"{sum(p != 200 for p in pings)} not 200; small PNGs p99 {p99:.1f} ms; server RSS peak {max(rss, default=0):.0f} MiB "
          f"(from {min(rss, default=0):.0f}); {waited} request(s) waited for a model worker; {behind} small "
          f"request(s) ran beside a slow one and took longer than the p99 of the others ({alone_p99 * 1000:.1f} ms)")
    h.result("serve_hostile_5xx", counts["5xx"], "<=0")
    h.result("serve_hostile_wrong_or_unanswered", counts["wrong"] + counts["no_answer"], "<=0")
    h.result("serve_hostile_ping_not_200", sum(p != 200 for p in pings) if pings else float("nan"), "<=0")
    h.result("serve_hostile_stalled_headers_408", counts["headers_408"], "-")
    h.result("serve_hostile_small_p99_ms", p99, "-")
    h.result("serve_hostile_rss_peak_mib", max(rss, default=float("nan")), "-")
    h.result("serve_hostile_waited_for_a_worker", waited, "-")
    h.result("serve_hostile_waited_behind_a_slow_one", behind, "-")


def _refused(answer: requests.Response) -> bool:
    """A 4xx whose body is the one-line JSON error the server promises."""
    try:
        return 400 <= answer.status_code < 500 and "\n" not in answer.text and bool(answer.json()["error"])
    except (ValueError, KeyError, TypeError):
        return False


def _right(answer: requests.Response, expected) -> bool:
    if answer.status_code != 200:
        return False
    rows = answer.json()["predictions"]
    probabilities, classes = expected
    return ([r["classes"] for r in rows] == classes
            and np.allclose([r["probabilities"] for r in rows], probabilities, atol=1e-5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--malformed-every", type=int, default=10)
    parser.add_argument("--latency-requests", type=int, default=200, help="per client, per case")
    parser.add_argument("--hostile-requests", type=int, default=10_000, help="0: no hostile load")
    parser.add_argument("--stalled", type=int, default=8, help="connections that stall mid-body, hostile load")
    parser.add_argument("--stalled-headers", type=int, default=70,
                        help="connections that send their headers a byte a second and never end them, hostile load")
    args = parser.parse_args()
    mlp, cnn, rows = _models(h.work_dir("serve_load"))
    if args.latency_requests:
        latency(mlp, cnn, rows, args.latency_requests)
    load(mlp, rows, args.requests, args.clients, args.malformed_every)
    if args.hostile_requests:
        hostile(cnn, args.hostile_requests, args.clients, args.stalled, args.stalled_headers)


if __name__ == "__main__":
    main()
