"""Tiny models saved as training saves them (save_for_serving), and a started server."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
TABLE_CLASSES = ("setosa", "versicolor", "virginica")
IMAGE_CLASSES = ("cat", "dog")
WIDTH, SIZE = 4, 32


def save_table_model(model_dir: str) -> str:
    import tensorflow as tf

    from training_entry.model import network

    tf.keras.utils.set_random_seed(0)
    network.save_for_serving(network.build_model(WIDTH, len(TABLE_CLASSES)), model_dir, "1",
                             class_names=TABLE_CLASSES)
    return model_dir


def save_image_model(model_dir: str) -> str:
    import tensorflow as tf

    from training_entry.model import architectures, network

    tf.keras.utils.set_random_seed(0)
    network.save_for_serving(architectures.small_cnn(SIZE, len(IMAGE_CLASSES)), model_dir, "1", SIZE,
                             class_names=IMAGE_CLASSES)
    return model_dir


# A table of typed columns as processing describes it (the penguins' shape, small): every CSV
# column in header order, the label ("species") left out, one column dropped.
TYPED_COLUMNS = (
    {"name": "island", "key": "island", "type": "categorical", "vocabulary": ["", "Biscoe", "Dream"]},
    {"name": "bill_length_mm", "key": "bill_length_mm", "type": "numeric", "mean": 40.0, "std": 2.0},
    {"name": "year", "key": "year", "type": "numeric", "mean": 2008.0, "std": 1.0},
    {"name": "id", "key": "id", "type": "categorical", "vocabulary": [], "dropped": True},
)
TYPED_LABEL = "species"
TYPED_CLASSES = ("Adelie", "Chinstrap", "Gentoo")


def save_typed_table_model(model_dir: str, described: bool = True) -> str:
    """As training saves a typed table's model (train.py); ``described=False``: as it did
    before the columns were written beside it."""
    import tensorflow as tf

    from training_entry.model import network, tabular

    tf.keras.utils.set_random_seed(0)
    model = tabular.build_tabular_model(TYPED_COLUMNS, len(TYPED_CLASSES))
    network.save_for_serving(
        model, model_dir, "1", signatures=tabular.tabular_signatures(model, TYPED_COLUMNS, TYPED_CLASSES),
        class_names=TYPED_CLASSES,
        table=tabular.table_description(TYPED_COLUMNS, TYPED_LABEL) if described else None)
    return model_dir


@pytest.fixture(scope="session")
def table_model(tmp_path_factory) -> str:
    return save_table_model(str(tmp_path_factory.mktemp("table-model")))


@pytest.fixture(scope="session")
def image_model(tmp_path_factory) -> str:
    return save_image_model(str(tmp_path_factory.mktemp("image-model")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, process: subprocess.Popen, port: int):
        self.process, self.port = process, port
        self.url = f"http://127.0.0.1:{port}"

    def post(self, path: str, body, content_type: str = "application/json", **kwargs):
        return requests.post(self.url + path, data=body, headers={"Content-Type": content_type}, timeout=30, **kwargs)


def start(argv: list[str], port: int, timeout: float = 60) -> Server:
    """``argv`` (a command serving on ``port``) started and answering /ping with 200."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    server = Server(process, port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited {process.returncode}: {process.stdout.read()}")
        # Not listening yet, or (a loaded machine) slow to answer its first /ping: ask again.
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):
            if requests.get(server.url + "/ping", timeout=5).status_code == 200:
                return server
        time.sleep(0.1)
    process.kill()
    raise AssertionError("the server did not answer /ping in time")


def stop(server: Server) -> tuple[int, str]:
    if server.process.poll() is None:
        server.process.terminate()
    out, _ = server.process.communicate(timeout=90)
    return server.process.returncode, out


@contextlib.contextmanager
def serving(model_dir: str):
    port = free_port()
    server = start([sys.executable, "-m", "serving.server", "--model-dir", model_dir, "--port", str(port)], port)
    try:
        yield server
    finally:
        stop(server)


@pytest.fixture(scope="module")
def table_server(table_model):
    with serving(table_model) as server:
        yield server


@pytest.fixture(scope="module")
def image_server(image_model):
    with serving(image_model) as server:
        yield server


def encoded_image(kind: str = "png", seed: int = 0) -> bytes:
    import numpy as np
    import tensorflow as tf

    pixels = np.random.default_rng(seed).integers(0, 256, (40, 30, 3), dtype=np.uint8)
    return (tf.io.encode_png(pixels) if kind == "png" else tf.io.encode_jpeg(pixels)).numpy()
