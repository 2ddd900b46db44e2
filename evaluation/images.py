"""Scoring an image model: the test shards' encoded images through the SavedModel's
``serving_bytes`` signature (the one a client sends JPEG/PNG bytes to), so evaluation tests
exactly what an endpoint will serve, decoding and resizing included.

Besides the metrics, the most confident mistakes are kept (at most
``report.MISCLASSIFIED_KEPT`` images, their bytes as they were) and saved beside the report
for the notebook's grid. Python 3.10 syntax.
"""

from __future__ import annotations

import heapq
import os

import numpy as np
import tensorflow as tf

from evaluation import report
from evaluation.metrics import Scores
from training_entry.contract import SERVING_INPUT_IMAGE_BYTES, SERVING_OUTPUT, SIGNATURE_BYTES
from training_entry.input import records
from training_entry.input.examples import image_feature_spec

# Images decode to [batch, S, S, 3] float32 inside the model: 64 x 224 x 224 x 3 x 4 bytes is
# 38 MB, where the tables' 1024 records would be 600 MB.
DEFAULT_IMAGE_BATCH_SIZE = 64
_PNG_MAGIC = b"\x89PNG"


class ImageModelError(Exception):
    """The SavedModel cannot score encoded images; the message says what training must export."""


def load_bytes_signature(version_dir: str, archive: str):
    """The ``serving_bytes`` concrete function of the SavedModel, checked for its input and
    output names."""
    version = os.path.basename(version_dir)
    try:
        loaded = tf.saved_model.load(version_dir)
    except Exception as e:  # TF raises many types for an unloadable SavedModel
        raise ImageModelError(
            f"{archive}: cannot load version {version} as a SavedModel ({type(e).__name__}: {_first_line(e)})"
        ) from None
    if SIGNATURE_BYTES not in loaded.signatures:
        raise ImageModelError(
            f"{archive}: version {version} has no '{SIGNATURE_BYTES}' signature (it has: "
            f"{', '.join(sorted(loaded.signatures)) or 'none'}); an image model must export "
            f"{SIGNATURE_BYTES}({SERVING_INPUT_IMAGE_BYTES}: tf.string [None]) -> {{'{SERVING_OUTPUT}': [None, classes]}}"
        )
    function = loaded.signatures[SIGNATURE_BYTES]
    inputs = function.structured_input_signature[1]
    outputs = function.structured_outputs
    if set(inputs) != {SERVING_INPUT_IMAGE_BYTES} or SERVING_OUTPUT not in outputs:
        raise ImageModelError(
            f"{archive}: signature '{SIGNATURE_BYTES}' takes {sorted(inputs)} and returns "
            f"{sorted(outputs)}; expected input '{SERVING_INPUT_IMAGE_BYTES}' and output '{SERVING_OUTPUT}'"
        )

    def score(images: tf.Tensor) -> np.ndarray:
        return np.asarray(function(**{SERVING_INPUT_IMAGE_BYTES: images})[SERVING_OUTPUT])

    score.saved_model = loaded  # the signature needs the loaded object's variables alive
    return score


class Mistakes:
    """The ``kept`` most confident wrong predictions seen so far (a min-heap on confidence;
    ties keep the earlier record)."""

    def __init__(self, kept: int = report.MISCLASSIFIED_KEPT):
        self.kept = kept
        self._heap: list[tuple[float, int, dict]] = []
        self._seen = 0

    def offer(self, confidence: float, entry: dict) -> None:
        self._seen += 1
        item = (confidence, -self._seen, entry)
        if len(self._heap) < self.kept:
            heapq.heappush(self._heap, item)
        elif item[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, item)

    def most_confident_first(self) -> list[dict]:
        return [entry for _, _, entry in sorted(self._heap, key=lambda i: i[:2], reverse=True)]


def score_images(function, batches, check_probabilities, kept: int = report.MISCLASSIFIED_KEPT):
    """(Scores, class names by label, mistakes) over ``batches`` of (shard, first, payloads)."""
    scores, mistakes, names = Scores(), Mistakes(kept), {}
    for shard, first, batch in batches:
        try:
            parsed = tf.io.parse_example(tf.constant(batch), image_feature_spec())
        except tf.errors.InvalidArgumentError as e:
            raise ImageModelError(
                f"{shard}: records {first}..{first + len(batch) - 1} are not trainpipe image "
                f"Examples ({_first_line(e.message)}); re-run PreprocessData"
            ) from None
        images = parsed[records.FEATURE_IMAGE]
        try:
            probabilities = function(images)
        except tf.errors.InvalidArgumentError as e:
            raise ImageModelError(
                f"{shard}: the model's {SIGNATURE_BYTES} signature failed on records "
                f"{first}..{first + len(batch) - 1} ({_first_line(e.message)})"
            ) from None
        labels = parsed[records.FEATURE_Y].numpy()
        check_probabilities(probabilities, labels, shard)
        scores.add(labels, probabilities)
        for label, name in zip(labels, parsed[records.FEATURE_CLASS_NAME].numpy(), strict=True):
            names.setdefault(int(label), name.decode("utf-8"))
        predicted = np.argmax(probabilities, axis=1)
        for i in np.flatnonzero(predicted != labels):
            mistakes.offer(
                float(probabilities[i, predicted[i]]),
                {
                    "shard": os.path.basename(shard),
                    "record": first + int(i),
                    "label": int(labels[i]),
                    "predicted": int(predicted[i]),
                    "confidence": float(probabilities[i, predicted[i]]),
                    "image": images[i].numpy(),
                },
            )
    class_names = [names.get(label, str(label)) for label in range(scores.confusion.shape[0])] if scores.records else []
    return scores, class_names, mistakes.most_confident_first()


def save_mistakes(mistakes: list[dict], class_names: list[str], directory: str) -> list[dict]:
    """Write each kept image (bytes as they were) under ``directory``/MISCLASSIFIED_DIR;
    returns the report's entries (file relative to the report)."""
    if not mistakes:
        return []
    folder = os.path.join(directory, report.MISCLASSIFIED_DIR)
    os.makedirs(folder, exist_ok=True)
    entries = []
    for rank, mistake in enumerate(mistakes):
        data = mistake["image"]
        extension = "png" if data.startswith(_PNG_MAGIC) else "jpg"
        name = f"{rank:03d}.{extension}"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        entry = {key: value for key, value in mistake.items() if key != "image"}
        entry.update(
            file=f"{report.MISCLASSIFIED_DIR}/{name}",
            class_name=class_names[mistake["label"]],
            predicted_class_name=class_names[mistake["predicted"]],
        )
        entries.append(entry)
    return entries


def _first_line(error: BaseException | str) -> str:
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."
