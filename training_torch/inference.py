"""SageMaker PyTorch inference handlers (sagemaker-pytorch-inference-toolkit's model_fn,
input_fn, predict_fn, output_fn) for a trainpipe model: ``model.pt`` (TorchScript) and
``metadata.json`` beside this folder. Rows come as CSV lines (``text/csv``) or JSON
``{"instances": [[...], ...]}``; images as their JPEG/PNG bytes. The answer is JSON:
``{"probabilities": [[...]], "classes": ["name", ...]}``. Standard library, torch, numpy, Pillow."""

import io
import json
import os

import numpy as np
import torch


def model_fn(model_dir):
    with open(os.path.join(model_dir, "metadata.json")) as f:
        metadata = json.load(f)
    model = torch.jit.load(os.path.join(model_dir, "model.pt"), map_location="cpu")
    model.eval()
    return {"model": model, "metadata": metadata}


def input_fn(body, content_type):
    if content_type.startswith("image/") or content_type == "application/x-image":
        from PIL import Image

        with Image.open(io.BytesIO(body)) as image:
            return ("image", np.asarray(image.convert("RGB"), dtype=np.uint8))
    text = body.decode() if isinstance(body, (bytes, bytearray)) else body
    if content_type == "application/json":
        return ("rows", np.asarray(json.loads(text)["instances"], dtype=np.float32))
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and not _numeric(lines[0]):
        lines = lines[1:]  # a header line, as batch transform and trainpipe predict skip it
    rows = [[float(v) for v in line.split(",")] for line in lines]
    return ("rows", np.asarray(rows, dtype=np.float32))


def _numeric(line):
    try:
        [float(v) for v in line.split(",")]
    except ValueError:
        return False
    return True


def predict_fn(data, loaded):
    kind, array = data
    metadata = loaded["metadata"]
    if kind == "image":
        from PIL import Image

        size = metadata["image_size"]
        # np.array, not asarray: a copy torch may write to (asarray of a PIL image is read-only,
        # and torch.from_numpy warns on every predict about it).
        array = np.array(Image.fromarray(array).resize((size, size), Image.BILINEAR), dtype=np.uint8)[None]
    with torch.no_grad():
        probabilities = torch.softmax(loaded["model"](torch.from_numpy(array)), dim=1).numpy()
    names = metadata["class_names"]
    return {"probabilities": probabilities.tolist(), "classes": [names[i] for i in probabilities.argmax(1)]}


def output_fn(prediction, accept):
    return json.dumps(prediction)
