"""Transfer learning: which weights train in which epochs, and proof of the starting weights.

A model with a pretrained backbone (``architectures.BACKBONE``) trains in two phases, each
its own ``model.fit`` after a (re)compile, as the Keras fine-tuning guide does it:

1. ``head``: epochs ``[0, head_epochs)``; the backbone is frozen, only the new head learns
   (a random head's large gradients would otherwise wreck the pretrained features).
2. ``fine-tune``: the remaining epochs; the top ``fine_tune_layers`` layers of the backbone
   are unfrozen (BatchNormalization layers stay frozen, and the backbone is called with
   ``training=False`` anyway), at ``fine_tune_lr_factor`` x the scaled learning rate.

Models without a backbone train in a single phase ``all``; so does a backbone without
pretrained weights (no ``init`` channel): freezing random weights would leave a random feature
extractor under the head (0.51 on ants/bees, every image an ant; issue 36), so the whole
network trains from scratch, and the job says how to get weights. Python 3.10 syntax.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from training_entry.config import Hyperparameters
from training_entry.model.architectures import backbone_of

HEAD = "head"
FINE_TUNE = "fine-tune"
ALL = "all"


@dataclass(frozen=True)
class Phase:
    name: str
    first_epoch: int  # 0-based, inclusive
    end_epoch: int  # exclusive
    lr_factor: float


def phases(model: tf.keras.Model, hp: Hyperparameters, pretrained: bool = True) -> list[Phase]:
    """``pretrained``: the backbone starts from weights of the init channel (else: one phase)."""
    if backbone_of(model) is None or hp.head_epochs == 0 or not pretrained:
        return [Phase(ALL, 0, hp.epochs, 1.0)]
    head = min(hp.head_epochs, hp.epochs)
    out = [Phase(HEAD, 0, head, 1.0)]
    if head < hp.epochs:
        out.append(Phase(FINE_TUNE, head, hp.epochs, hp.fine_tune_lr_factor))
    return out


def phase_at(all_phases: list[Phase], epoch: int) -> int:
    """Index of the phase that trains ``epoch`` (0-based); len(all_phases) when done."""
    for index, phase in enumerate(all_phases):
        if epoch < phase.end_epoch:
            return index
    return len(all_phases)


def set_trainable(model: tf.keras.Model, phase: Phase, fine_tune_layers: int) -> str:
    """Freeze/unfreeze for ``phase`` (takes effect at the next compile); says what it did."""
    backbone = backbone_of(model)
    if backbone is None or phase.name == ALL:
        if backbone is not None:  # built with trainable layers; a resumed phase set may differ
            backbone.trainable = True
        return "all layers train"
    if phase.name == HEAD:
        backbone.trainable = False
        return "backbone frozen, head trains"
    backbone.trainable = True
    layers = backbone.layers
    cut = max(len(layers) - fine_tune_layers, 0)
    unfrozen = 0
    for index, layer in enumerate(layers):
        layer.trainable = index >= cut and not isinstance(layer, tf.keras.layers.BatchNormalization)
        unfrozen += layer.trainable and bool(layer.weights)
    return (
        f"top {len(layers) - cut} of {len(layers)} backbone layers unfrozen ({unfrozen} with "
        f"weights, BatchNorm kept frozen) at x{phase.lr_factor:g} the learning rate"
    )


def weights_digest(layer: tf.keras.layers.Layer) -> str:
    """sha256 of a layer's weights in order (values and shapes): equal digests on every rank
    prove the broadcast; equal to the init file's digest proves the file was loaded."""
    h = hashlib.sha256()
    for weight in layer.get_weights():
        array = np.ascontiguousarray(weight)
        h.update(str(array.shape).encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]
