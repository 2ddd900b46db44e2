"""The model rank 0 writes: TorchScript (``model.pt``), its metadata, and the inference script
AWS's PyTorch inference image runs (``code/inference.py``).

Why TorchScript: the registered model must load where our code is not (the PyTorch inference
image, ``trainpipe predict``) and across PyTorch versions (trained on the 2.9 image, served by
another); a state dict needs the network's Python class, and ``torch.export``'s programs are
not promised to load in another release. A traced ``ScriptModule`` carries its graph and
weights and loads with ``torch.jit.load`` alone. The metadata says how to feed it: the data's
kind, the class names (label i is ``class_names[i]``) and, for images, the pixel size."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from training_entry import contract
from training_entry.input import records

INFERENCE_SCRIPT = Path(__file__).with_name("inference.py")


def example_input(kind: str, num_features: int, image_size: int) -> torch.Tensor:
    if kind == records.KIND_IMAGE:
        return torch.zeros(1, image_size, image_size, 3, dtype=torch.uint8)
    return torch.zeros(1, num_features, dtype=torch.float32)


def save(model: torch.nn.Module, model_dir: str, *, kind: str, manifest: records.Manifest, image_size: int) -> None:
    model.eval()
    os.makedirs(os.path.join(model_dir, "code"), exist_ok=True)
    with torch.no_grad():
        traced = torch.jit.trace(model, example_input(kind, manifest.num_features, image_size))
    traced.save(os.path.join(model_dir, contract.TORCH_MODEL_FILE))
    names = list(manifest.class_names) if manifest.class_names else [str(i) for i in range(manifest.num_classes)]
    metadata = {"framework": "pytorch", "kind": kind, "class_names": names,
                "num_features": manifest.num_features, "image_size": image_size}
    with open(os.path.join(model_dir, contract.TORCH_METADATA_FILE), "w") as f:
        json.dump(metadata, f, indent=2)
    # SageMaker: the PyTorch inference image imports code/inference.py from the model archive.
    Path(model_dir, "code", "inference.py").write_bytes(INFERENCE_SCRIPT.read_bytes())


def load(model_dir: str) -> tuple[torch.jit.ScriptModule, dict]:
    with open(os.path.join(model_dir, contract.TORCH_METADATA_FILE)) as f:
        metadata = json.load(f)
    return torch.jit.load(os.path.join(model_dir, contract.TORCH_MODEL_FILE), map_location="cpu"), metadata
