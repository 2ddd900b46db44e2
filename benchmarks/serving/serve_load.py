"""``trainpipe serve`` under load: latency and throughput, then a bounded load test.

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
The server is ``python -m serving.server`` on 127.0.0.1, a process of its own, as
``trainpipe serve`` runs it.
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
def _server(model_dir: str):
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
    args = parser.parse_args()
    mlp, cnn, rows = _models(h.work_dir("serve_load"))
    if args.latency_requests:
        latency(mlp, cnn, rows, args.latency_requests)
    load(mlp, rows, args.requests, args.clients, args.malformed_every)


if __name__ == "__main__":
    main()
