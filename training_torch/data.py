"""What a rank trains on: its shards of a split (``records.assign_shards``, as the TensorFlow
entrypoint plans them), decoded into tensors. A table's records hold ``FEATURE_X`` floats; an
image's hold the encoded file (``FEATURE_IMAGE``), decoded with Pillow and resized to the
training size.

File and FastFile channels are folders of shards, read once (``load``). Pipe channels are a
stream per epoch, read each epoch (``PipeChannel``) with the TensorFlow room's plan and reader
(``training_entry/input/plan.py``, ``pipe.py``: standard library only, no TensorFlow): the
same records reach the same rank, the same number of steps on every rank."""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from training_entry import config as job_config
from training_entry.input import pipe, records
from training_entry.input import plan as input_plan
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


def decode(serialized: Iterable[bytes], kind: str, image_size: int) -> Split:
    """Serialized ``tf.train.Example`` records -> tensors."""
    xs, ys = [], []
    for record in serialized:
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


def load(paths: list[str], kind: str, image_size: int) -> Split:
    return decode((r for path in paths for r in records.read_file_records(path)), kind, image_size)


# --- Pipe mode ---------------------------------------------------------------------------------
def input_mode(channel: str) -> str:
    """SageMaker: the channel's TrainingInputMode in inputdataconfig (SM_INPUT_DATA_CONFIG)."""
    entries = json.loads(os.environ.get("SM_INPUT_DATA_CONFIG") or "{}")
    return (entries.get(channel) or {}).get("TrainingInputMode", "File")


def pipe_dir() -> str:
    """SageMaker: where the FIFOs ``<channel>_<epoch>`` appear (/opt/ml/input/data)."""
    return job_config.input_data_dir(os.environ)


def private_pipe_dir(run_id: str, host: str) -> str:
    """Where a host's local rank 0 hands its other local ranks their records (one per job and
    host: the local runner's hosts share one machine's /tmp)."""
    return os.path.join(tempfile.gettempdir(), f"trainpipe-torch-pipes-{run_id}-{host}")


def _no_gather(_value):  # a Pipe plan counts on the manifest alone; only File + Sharded gathers
    raise AssertionError("a Pipe channel's plan gathers nothing")


class PipeChannel:
    """One Pipe channel on this rank: each ``next_pass()`` reads the channel's next FIFO and
    returns exactly ``quota`` records of this rank, the same count on every rank of the job
    (a collective must not wait on a rank with fewer batches).

    Who reads what is the TensorFlow room's rule (``input_plan.plan_channel``): FullyReplicated,
    record i of a host's stream belongs to the local rank whose ``records.assign_shards`` list
    holds its shard; ShardedByS3Key, the records are dealt to the host's local ranks in turn and
    every rank counts on the smallest object's records only. One process reads a FIFO: with
    several local ranks, local rank 0 reads it for all (``pipe.HostPipeDemux``) and the others
    read their share from private FIFOs."""

    def __init__(self, channel: job_config.Channel, manifest: records.Manifest, layout: input_plan.Layout,
                 batch_size: int, fifo_dir: str, private_dir: str):
        name = channel.name
        # Training keeps whole batches; validation's shrink to what the fewest records fill.
        self.plan = input_plan.plan_channel(channel, manifest, layout, batch_size, gather=_no_gather)
        self.private_dir = private_dir
        self.fifos = pipe.FifoSequence(fifo_dir, name)
        self.hint = pipe.staged_as_files_hint(fifo_dir, name)
        self.passes = 0
        self.demux = None
        if layout.local_size > 1 and layout.local_rank == 0:
            os.makedirs(private_dir, mode=0o700, exist_ok=True)
            self.demux = pipe.HostPipeDemux(self.fifos, self.plan.router(), layout.local_size, self.plan.quota,
                                            private_dir, hint=self.hint)

    @property
    def quota(self) -> int:
        return self.plan.quota

    def next_pass(self) -> list[bytes]:
        layout, index = self.plan.layout, self.passes
        self.passes += 1
        if self.demux is not None:
            chunks = self.demux.next_epoch()
        elif layout.local_size > 1:
            # Local rank 0 checked the CRCs; wait longer than it waits for SageMaker's FIFO, so
            # that its error (naming that FIFO) is the job's failure reason when it never comes.
            path = pipe.private_fifo_path(self.private_dir, self.plan.channel.name, layout.local_rank, index)
            chunks = pipe.read_epoch_chunks(path, self.quota, verify=False, forwarded=True,
                                            timeout=pipe.wait_seconds() + 60)
        else:
            chunks = pipe.read_epoch_chunks(self.fifos.next_path(), self.quota, owner=layout.local_rank,
                                            router=self.plan.router(), hint=self.hint)
        return [r for chunk in chunks for r in chunk]


class Source:
    """A channel's split for each epoch: File/FastFile decoded once and the same every epoch;
    Pipe read from the epoch's FIFO. ``records``: this rank's records per epoch, known before
    any epoch (Pipe: the plan's quota)."""

    def __init__(self, kind: str, image_size: int, split: Split | None = None, stream: PipeChannel | None = None):
        self.kind, self.image_size, self.split, self.stream = kind, image_size, split, stream
        self.records = stream.quota if stream is not None else len(split.y)

    def epoch(self) -> Split:
        if self.stream is None:
            return self.split
        return decode(self.stream.next_pass(), self.kind, self.image_size)

    def close(self) -> None:
        if self.stream is not None and self.stream.demux is not None:  # the folder's maker removes it
            shutil.rmtree(self.stream.private_dir, ignore_errors=True)


def pipe_refusal(strategy: str) -> str:
    """Why a strategy whose replica spans several ranks (GPipe's stages, which all need every
    batch) cannot read a Pipe channel: one process reads a FIFO, and it deals the records out."""
    return (f"strategy {strategy} feeds the same batches to every rank of a host (its stages), and a Pipe "
            "FIFO is read by one process that deals its records out: use File or FastFile input, or ddp")


@dataclass(frozen=True)
class RankPlace:
    """Where this rank sits: among SageMaker hosts, and among its host's torchrun ranks."""

    host_index: int
    host_count: int
    host: str
    local_rank: int
    local_size: int
    ranks_per_replica: int  # GPipe: a host's ranks are one replica's stages
    strategy: str
    run_id: str  # the same on every rank of the job


def sources(channels: Iterable[str], place: RankPlace, *, kind: str, image_size: int, batch_size: int,
            manifest_dir: str, channel_dir) -> dict[str, Source]:
    """Each data channel's ``Source`` for this rank. ``channel_dir(name)``: a File channel's folder."""
    out = {}
    per = place.ranks_per_replica
    for name in channels:
        distribution = _distribution(name)
        if input_mode(name) == "Pipe":
            if per > 1:
                raise ValueError(f"channel {name} is in Pipe mode: {pipe_refusal(place.strategy)}")
            manifest = records.Manifest.load(os.path.join(manifest_dir, records.manifest_name(name)))
            layout = input_plan.Layout(place.host_index, place.host_count, place.local_rank, place.local_size)
            channel = job_config.Channel(name, "Pipe", distribution, os.path.join(pipe_dir(), name))
            stream = PipeChannel(channel, manifest, layout, batch_size, pipe_dir(),
                                 private_pipe_dir(place.run_id, place.host))
            out[name] = Source(kind, image_size, stream=stream)
        else:
            paths = rank_shards(channel_dir(name), distribution, place.host_index, place.host_count,
                                place.local_rank // per, place.local_size // per)
            out[name] = Source(kind, image_size, split=load(paths, kind, image_size))
    return out


def _distribution(channel: str) -> str:
    entries = json.loads(os.environ.get("SM_INPUT_DATA_CONFIG") or "{}")
    return (entries.get(channel) or {}).get("S3DistributionType", "FullyReplicated")
