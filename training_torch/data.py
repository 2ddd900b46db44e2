"""What a rank trains on: its shards of a split (``records.assign_shards``, as the TensorFlow
entrypoint plans them), decoded into tensors once. A table's records hold ``FEATURE_X`` floats;
an image's hold the encoded file (``FEATURE_IMAGE``), decoded with Pillow and resized to the
training size. File and FastFile channels are folders of shards; Pipe is not read here yet."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

import numpy as np
import torch

from training_entry.input import records
from training_torch.examples import parse_example


@dataclass(frozen=True)
class Split:
    x: torch.Tensor  # [n, features] float32, or [n, size, size, 3] uint8
    y: torch.Tensor  # [n] int64


def channel_shards(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"channel folder {directory} does not exist")
    return sorted(n for n in os.listdir(directory) if records.is_shard_name(n))


def rank_shards(directory: str, distribution: str, host_index: int, host_count: int,
                local_rank: int, local_size: int) -> list[str]:
    """This rank's shard paths. SageMaker: under ShardedByS3Key the folder already holds only
    this host's share; its local ranks split it (``records.assign_shards``)."""
    names = channel_shards(directory)
    if distribution == "ShardedByS3Key":
        mine = names[local_rank::local_size]
    else:
        mine = records.assign_shards(names, distribution, host_index, host_count, local_rank, local_size)
    return [os.path.join(directory, n) for n in mine]


def _image(payload: bytes, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(payload)) as image:
        return np.asarray(image.convert("RGB").resize((size, size), Image.BILINEAR), dtype=np.uint8)


def load(paths: list[str], kind: str, image_size: int) -> Split:
    xs, ys = [], []
    for path in paths:
        for record in records.read_file_records(path):
            example = parse_example(record)
            ys.append(int(example[records.FEATURE_Y][0]))
            if kind == records.KIND_IMAGE:
                xs.append(_image(example[records.FEATURE_IMAGE][0], image_size))
            else:
                xs.append(np.asarray(example[records.FEATURE_X], dtype=np.float32))
    if not xs:
        shape = (0, image_size, image_size, 3) if kind == records.KIND_IMAGE else (0, 0)
        return Split(torch.zeros(shape), torch.zeros(0, dtype=torch.int64))
    return Split(torch.from_numpy(np.stack(xs)), torch.tensor(ys, dtype=torch.int64))
