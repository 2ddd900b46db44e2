"""The PyTorch entrypoint (``training_torch/train.py``) on one GPU, on synthetic image records:
images/s of its small CNN, printed beside the one-H100 ResNet-50 anchor (3,979 images/s, bf16,
PyTorch eager, channels_last; issue 45), which is a different and far larger model.

    python -m benchmarks.gpu.torch_entry --make DIR      # here (TensorFlow encodes the records)
    python benchmarks/gpu/torch_entry.py --records DIR   # on the GPU machine (torch only)

The records are written by this machine's processing code (``serialize_image``), shards and
manifest exactly as the processing step lays them out; the run is torchrun with one process,
as SageMaker's toolkit starts it on a one-GPU instance.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANCHOR_IMAGES_PER_SECOND = 3979.0  # ResNet-50, one H100, bf16 (issue 45's anchor)


def make(directory: Path, count: int = 4096, size: int = 64, classes: int = 4) -> None:
    import numpy as np
    from PIL import Image

    sys.path.insert(0, str(REPO))
    from training_entry.input import records
    from training_entry.input.examples import serialize_image

    rng = np.random.default_rng(0)
    names = [f"class{i}" for i in range(classes)]
    for split, n in (("train", count), ("validation", count // 8)):
        payloads = []
        for i in range(n):
            label = i % classes
            pixels = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
            pixels[..., label % 3] = 255 - label * 40  # a learnable colour cue per class
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
            payloads.append(serialize_image(buffer.getvalue(), label, names[label], size, size))
        (directory / split).mkdir(parents=True, exist_ok=True)
        records.write_records(str(directory / split / records.shard_name(split, 0, 1)), payloads)
        manifest = records.Manifest(split=split, num_features=0, num_classes=classes,
                                    shards={records.shard_name(split, 0, 1): n}, kind=records.KIND_IMAGE,
                                    class_names=tuple(names))
        (directory / "manifest").mkdir(parents=True, exist_ok=True)
        (directory / "manifest" / records.manifest_name(split)).write_text(manifest.to_json())


def run(directory: Path, epochs: int, batch_size: int, image_size: int) -> dict:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(REPO), SM_HOSTS='["algo-1"]', SM_CURRENT_HOST="algo-1",
               SM_CHANNEL_TRAIN=str(directory / "train"), SM_CHANNEL_VALIDATION=str(directory / "validation"),
               SM_CHANNEL_MANIFEST=str(directory / "manifest"), SM_MODEL_DIR=str(directory / "model"))
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=1",
               "--master_addr=127.0.0.1", f"--master_port={port}", str(REPO / "training_torch" / "train.py"),
               "--epochs", str(epochs), "--batch-size", str(batch_size), "--image-size", str(image_size),
               "--base-learning-rate", "0.001", "--warmup-epochs", "0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=540)
    print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    lines = [line for line in done.stdout.splitlines() if line.startswith("trainpipe-metrics")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the entrypoint failed (exit {done.returncode})")
    last = dict(part.split("=", 1) for part in lines[-1].split()[1:])
    import torch

    result = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
              "torch": torch.__version__, "images_per_second": float(last["samples_per_sec"]),
              "val_accuracy": float(last["val_accuracy"]), "batch_size": batch_size, "image_size": image_size,
              "anchor_resnet50_images_per_second": ANCHOR_IMAGES_PER_SECOND}
    print("RESULT " + json.dumps(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--make", type=Path)
    parser.add_argument("--records", type=Path)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=64)
    args = parser.parse_args(argv)
    if args.make:
        make(args.make)
    if args.records:
        run(args.records, args.epochs, args.batch_size, args.image_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
