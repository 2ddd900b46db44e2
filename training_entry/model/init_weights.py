"""The optional ``init`` channel: start training from an earlier model's weights.

Accepted in the channel directory (SageMaker: File mode, so it is on local disk; nothing is
downloaded from the internet): a ``model.tar.gz`` as training writes it (SavedModel at
``1/``), a SavedModel directory (at the root or in a numbered version directory), a Keras
weights file (``*.h5``) or a TensorFlow checkpoint (``*.index`` + data files). The weights
must fit this model: same features, same classes, same ``model.py``. Python 3.10 syntax.
"""

from __future__ import annotations

import os
import tarfile
import tempfile

import tensorflow as tf

from training_entry import archives
from training_entry.failure import UserError

SAVED_MODEL_FILE = "saved_model.pb"


class InitError(UserError):
    """The init channel holds nothing usable, or weights that do not fit the model."""


def _saved_model_dir(root: str) -> str | None:
    if os.path.isfile(os.path.join(root, SAVED_MODEL_FILE)):
        return root
    versions = sorted(
        (int(name) for name in os.listdir(root)
         if name.isdigit() and os.path.isfile(os.path.join(root, name, SAVED_MODEL_FILE))),
    )
    return os.path.join(root, str(versions[-1])) if versions else None


def _extract(archive: str, destination: str) -> None:
    """The one safe extractor (training_entry/archives.py): nothing outside ``destination``."""
    try:
        archives.extract(archive, destination)
    except archives.UnsafeArchiveError as e:
        raise InitError(f"init channel: {e}") from None


def find_source(directory: str, scratch: str) -> tuple[str, str]:
    """(kind, path): kind is ``saved_model``, ``h5`` or ``checkpoint``."""
    if not os.path.isdir(directory):
        raise InitError(f"init channel {directory} does not exist")
    entries = sorted(os.listdir(directory))
    saved = _saved_model_dir(directory)
    if saved:
        return "saved_model", saved
    archives = [e for e in entries if e.endswith(".tar.gz")]
    if archives:
        archive = os.path.join(directory, archives[0])
        try:
            _extract(archive, scratch)
        except (tarfile.TarError, OSError) as e:
            raise InitError(f"init channel: cannot extract {archive} ({e})") from None
        saved = _saved_model_dir(scratch)
        if not saved:
            raise InitError(f"init channel: {archive} holds no SavedModel (expected 1/{SAVED_MODEL_FILE})")
        return "saved_model", saved
    for entry in entries:
        if entry.endswith(".h5"):
            return "h5", os.path.join(directory, entry)
    for entry in entries:
        if entry.endswith(".index"):
            return "checkpoint", os.path.join(directory, entry[: -len(".index")])
    raise InitError(
        f"init channel {directory} holds {', '.join(entries[:5]) or 'nothing'}; expected a "
        f"model.tar.gz, a SavedModel directory, a Keras .h5 weights file or a TF checkpoint"
    )


def h5_holds_whole_model(path: str) -> bool:
    """Whether a Keras .h5 weights file was saved from a whole model with a backbone (one of
    its top-level layers is the backbone) rather than from the backbone alone."""
    import h5py

    from training_entry.model.architectures import BACKBONE

    with h5py.File(path, "r") as f:
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs.get("layer_names", [])]
    return BACKBONE in names


def load_initial_weights(model: tf.keras.Model, directory: str, backbone: tf.keras.Model | None = None) -> str:
    """Copy the init channel's weights into ``model``; returns what was loaded. With a
    ``backbone`` (transfer learning), a .h5 of the backbone alone (no top: what
    ``python -m training_entry.model.init_backbone`` writes) loads into the backbone."""
    with tempfile.TemporaryDirectory(prefix="trainpipe-init-") as scratch:
        kind, path = find_source(directory, scratch)
        try:
            if kind == "h5" and backbone is not None and not h5_holds_whole_model(path):
                backbone.load_weights(path)
                return f"backbone weights {path}"
            if kind == "saved_model":
                source = tf.keras.models.load_model(path, compile=False)
                weights = source.get_weights()
                expected = [w.shape for w in model.get_weights()]
                if [w.shape for w in weights] != expected:
                    raise InitError(
                        f"init model {path} has weights of shapes {[w.shape for w in weights]} but "
                        f"this model needs {expected}: it was trained on other features/classes "
                        f"or with another model.py"
                    )
                model.set_weights(weights)
            else:
                model.load_weights(path)
        except InitError:
            raise
        except Exception as e:  # Keras raises many types for weights that do not fit
            raise InitError(f"cannot load initial weights from {path}: {type(e).__name__}: {e}") from None
    return f"{kind} {path}"
