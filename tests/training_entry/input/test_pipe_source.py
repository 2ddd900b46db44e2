"""Which Pipe reader a rank gets, and one reader per channel for the whole job.

The records a Pipe pass yields are tested through the datasets Keras gets (test_datasets.py).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import tempfile
import types

from training_entry.config import Channel, Hosts
from training_entry.input import pipe_source, records
from training_entry.input.context import InputContext
from training_entry.input.plan import Layout, plan_channel


def _plan(layout):
    manifest = records.Manifest("train", 3, 2, {records.shard_name("train", i, 2): 8 for i in range(2)})
    return plan_channel(Channel("train", "Pipe", "FullyReplicated", "/unused/train"), manifest, layout, 4)


def _installed_pipe_mode_dataset(monkeypatch):
    module = types.ModuleType("sagemaker_tensorflow")
    module.__spec__ = importlib.machinery.ModuleSpec("sagemaker_tensorflow", None)
    module.PipeModeDataset = object
    monkeypatch.setitem(sys.modules, "sagemaker_tensorflow", module)


def test_pipe_mode_dataset_only_when_installed_and_the_rank_is_alone_on_its_host(monkeypatch):
    alone, shared = _plan(Layout(0, 1, 0, 1)), _plan(Layout(0, 1, 0, 2))
    monkeypatch.setitem(sys.modules, "sagemaker_tensorflow", None)  # import fails: not installed
    assert not pipe_source.pipe_mode_dataset_available()
    assert pipe_source.pipe_reader_name(alone) == records.reader_implementation()
    _installed_pipe_mode_dataset(monkeypatch)
    assert pipe_source.uses_pipe_mode_dataset(alone) and pipe_source.pipe_reader_name(alone) == "PipeModeDataset"
    # Several local ranks: local rank 0 reads the host's FIFO and deals records, with our reader.
    assert not pipe_source.uses_pipe_mode_dataset(shared)
    assert pipe_source.pipe_reader_name(shared) == records.reader_implementation()


def test_one_reader_per_channel_for_the_whole_job(tmp_path):
    """A second fit (the next transfer-learning phase) goes on with the channel's next FIFO."""
    plan = _plan(Layout(0, 1, 0, 1))
    ctx = InputContext(hosts=Hosts("algo-1", ("algo-1",)), fifo_dir=str(tmp_path), config_dir=str(tmp_path),
                       private_dir=str(tmp_path / "private"), num_features=3, seed=1)
    pipe_source.pipe_blocks(plan, ctx, shuffle=True)
    reader = ctx.pipe_readers["train"]
    pipe_source.pipe_blocks(plan, ctx, shuffle=False)
    assert ctx.pipe_readers == {"train": reader}
    assert reader.fifos.next_path() == os.path.join(str(tmp_path), "train_0")  # nothing opened yet


def test_private_pipe_dir_is_per_job_and_host():
    path = pipe_source.private_pipe_dir("run-7", "algo-2")
    assert path == os.path.join(tempfile.gettempdir(), "trainpipe-pipes-run-7-algo-2")
