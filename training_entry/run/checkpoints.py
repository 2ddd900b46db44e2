"""Per-epoch checkpoints: weights, optimizer state and the epoch count, written atomically.

SageMaker: ``/opt/ml/checkpoints`` is restored from ``checkpoint_s3_uri`` when a job starts
(a retried or spot-resumed job finds the previous attempt's epochs) and synced back while it
runs, so a checkpoint must never be visible half-written. Each one is written into a hidden
``.epoch-NNNNNN.partial-*`` directory, completed with a marker file, then renamed to
``epoch-NNNNNN`` (N = epochs completed). A directory without its marker is ignored. The
newest ``KEEP`` are kept.

Only rank 0 writes and reads them; the other ranks get the state by broadcast.
Python 3.10 syntax.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass

import tensorflow as tf

from training_entry.failure import UserError

KEEP = 2
MARKER = "trainpipe-checkpoint.json"
STATE_PREFIX = "state"  # tf.train.Checkpoint files: state.index, state.data-*
FORMAT = 1
_NAME = re.compile(r"^epoch-(\d{6})$")


class CheckpointError(UserError):
    """A checkpoint exists but cannot be restored into this model and optimizer."""


def dir_name(epoch: int) -> str:
    return f"epoch-{epoch:06d}"


@dataclass(frozen=True)
class Found:
    epoch: int  # epochs completed when it was written
    path: str  # the checkpoint directory

    @property
    def prefix(self) -> str:
        return os.path.join(self.path, STATE_PREFIX)


def _read_marker(path: str) -> int | None:
    try:
        with open(os.path.join(path, MARKER)) as f:
            doc = json.load(f)
        epoch = int(doc["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not os.path.exists(os.path.join(path, STATE_PREFIX + ".index")):
        return None
    return epoch


def complete(root: str) -> list[Found]:
    """Every complete checkpoint under ``root``, oldest first."""
    if not os.path.isdir(root):
        return []
    found = []
    for name in os.listdir(root):
        match = _NAME.match(name)
        path = os.path.join(root, name)
        if match and os.path.isdir(path):
            epoch = _read_marker(path)
            if epoch is not None and epoch == int(match.group(1)):
                found.append(Found(epoch, path))
    return sorted(found, key=lambda f: f.epoch)


def newest(root: str) -> Found | None:
    found = complete(root)
    return found[-1] if found else None


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(checkpoint: tf.train.Checkpoint, root: str, epoch: int, keep: int = KEEP) -> str:
    """Write ``checkpoint`` as ``root/epoch-<epoch>`` atomically; prune to the newest ``keep``."""
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, dir_name(epoch))
    partial = tempfile.mkdtemp(prefix=f".{dir_name(epoch)}.partial-", dir=root)
    try:
        checkpoint.write(os.path.join(partial, STATE_PREFIX))
        with open(os.path.join(partial, MARKER), "w") as f:
            json.dump({"epoch": epoch, "format": FORMAT}, f)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(partial)
        if os.path.exists(final):  # the same epoch again (a resumed job redid it): replace
            stale = tempfile.mkdtemp(prefix=f".{dir_name(epoch)}.stale-", dir=root)
            os.rename(final, os.path.join(stale, "old"))
            os.rename(partial, final)
            shutil.rmtree(stale, ignore_errors=True)
        else:
            os.rename(partial, final)
        _fsync_dir(root)
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # already renamed, or half-written: remove
    prune(root, keep)
    return final


def prune(root: str, keep: int = KEEP) -> None:
    """Keep the newest ``keep`` complete checkpoints; drop leftovers of interrupted writes."""
    for old in complete(root)[:-keep] if keep > 0 else complete(root):
        shutil.rmtree(old.path, ignore_errors=True)
    for name in os.listdir(root):
        if name.startswith(".epoch-") and (".partial-" in name or ".stale-" in name):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def restore(checkpoint: tf.train.Checkpoint, found: Found, root: str, weights_only: bool = False) -> None:
    """Load ``found`` into ``checkpoint``'s objects; every existing variable must match.
    ``weights_only``: the model and epoch count, not the optimizer (a checkpoint from the end
    of a transfer-learning phase, resumed in the next phase with a new optimizer)."""
    if weights_only:
        checkpoint = tf.train.Checkpoint(
            model=checkpoint.model, epochs_completed=checkpoint.epochs_completed
        )
    try:
        status = checkpoint.read(found.prefix)
        if weights_only:
            status.expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"checkpoint {found.path} does not fit this model/optimizer ({first}); it was "
            f"written with other settings (features, classes, mixed-precision?): delete {root} "
            f"to start from scratch"
        ) from None


def state_variables(checkpoint: tf.train.Checkpoint, optimizer) -> list[tf.Variable]:
    """Every variable a checkpoint carries, in an order that is the same on every rank:
    model weights, optimizer slots and iterations, loss-scale state, the epoch counter.
    (Slots hang off the optimizer, not the object graph, hence both sources.)"""
    seen = set()
    out = []
    candidates = [
        *tf.train.TrackableView(checkpoint).descendants(),
        *optimizer.variables(),
    ]
    for obj in candidates:
        if isinstance(obj, tf.Variable) and obj.ref() not in seen:
            seen.add(obj.ref())
            out.append(obj)
    return out


def training_state(model: tf.keras.Model, optimizer) -> tuple[tf.train.Checkpoint, tf.Variable]:
    """The checkpointed objects, optimizer slots created now (legacy Keras optimizers make
    them lazily at the first step) so that a restore fills them at once and a broadcast
    from rank 0 covers them before any rank takes a step."""
    optimizer._create_all_weights(model.trainable_variables)
    epochs_completed = tf.Variable(0, dtype=tf.int64, trainable=False, name="epochs_completed")
    state = tf.train.Checkpoint(model=model, optimizer=optimizer, epochs_completed=epochs_completed)
    return state, epochs_completed
