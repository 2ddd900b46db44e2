"""Checkpoints: atomic writes, the newest complete one, resume with optimizer state."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from training_entry.model.network import build_model
from training_entry.run import checkpoints


def _trained(seed=0, steps=3, loss_scale=False):
    tf.keras.utils.set_random_seed(seed)
    model = build_model(4, 3)
    optimizer = tf.keras.optimizers.legacy.Adam(0.01)
    if loss_scale:
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    model.compile(optimizer, "sparse_categorical_crossentropy")
    state, counter = checkpoints.training_state(model, optimizer)
    if steps:
        x = np.random.default_rng(seed).normal(size=(steps * 8, 4)).astype("float32")
        model.fit(x, np.arange(steps * 8) % 3, batch_size=8, epochs=1, verbose=0)
    return model, optimizer, state, counter


def test_save_find_newest_and_keep_two(tmp_path):
    _, _, state, counter = _trained(steps=0)
    for epoch in (1, 2, 3):
        counter.assign(epoch)
        path = checkpoints.save(state, str(tmp_path), epoch)
        assert path == str(tmp_path / f"epoch-{epoch:06d}")
    assert [f.epoch for f in checkpoints.complete(str(tmp_path))] == [2, 3]
    assert checkpoints.newest(str(tmp_path)) == checkpoints.Found(3, str(tmp_path / "epoch-000003"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-000002", "epoch-000003"]


def test_incomplete_checkpoints_are_ignored_and_cleaned_up(tmp_path):
    _, _, state, _ = _trained(steps=0)
    checkpoints.save(state, str(tmp_path), 1)
    # A job killed while writing epoch 2 (no marker yet), one with a broken marker, and one
    # killed before the rename.
    (tmp_path / "epoch-000002").mkdir()
    (tmp_path / "epoch-000002" / "state.index").write_text("")
    (tmp_path / "epoch-000004").mkdir()
    (tmp_path / "epoch-000004" / checkpoints.MARKER).write_text("{not json")
    (tmp_path / ".epoch-000005.partial-abc").mkdir()
    assert checkpoints.newest(str(tmp_path)).epoch == 1
    assert checkpoints.newest(str(tmp_path / "absent")) is None
    checkpoints.save(state, str(tmp_path), 3)
    assert not (tmp_path / ".epoch-000005.partial-abc").exists()
    assert json.loads((tmp_path / "epoch-000003" / checkpoints.MARKER).read_text()) == {"epoch": 3, "format": 1}


def test_saving_an_epoch_again_replaces_it(tmp_path):
    _, _, state, counter = _trained(steps=0)
    counter.assign(7)
    checkpoints.save(state, str(tmp_path), 2)
    counter.assign(2)
    checkpoints.save(state, str(tmp_path), 2)
    _, _, fresh, fresh_counter = _trained(seed=1, steps=0)
    checkpoints.restore(fresh, checkpoints.newest(str(tmp_path)), str(tmp_path))
    assert int(fresh_counter.numpy()) == 2


@pytest.mark.parametrize("loss_scale", [False, True])
def test_restore_brings_back_weights_and_optimizer_state(tmp_path, loss_scale):
    model, optimizer, state, counter = _trained(seed=0, loss_scale=loss_scale)
    counter.assign(5)
    checkpoints.save(state, str(tmp_path), 5)
    other, other_optimizer, other_state, other_counter = _trained(seed=1, steps=0, loss_scale=loss_scale)
    checkpoints.restore(other_state, checkpoints.newest(str(tmp_path)), str(tmp_path))
    assert int(other_counter.numpy()) == 5
    for a, b in zip(model.get_weights(), other.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    saved = checkpoints.state_variables(state, optimizer)
    restored = checkpoints.state_variables(other_state, other_optimizer)
    assert [v.name for v in saved] == [v.name for v in restored]
    for a, b in zip(saved, restored, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    names = {v.name for v in saved}
    assert int(other_optimizer.iterations.numpy()) == 3
    assert any("/m:0" in n for n in names) and any("/v:0" in n for n in names)  # Adam slots
    assert ("current_loss_scale:0" in names) is loss_scale


def test_restore_into_a_different_model_says_how_to_start_over(tmp_path):
    _, _, state, _ = _trained()
    checkpoints.save(state, str(tmp_path), 1)
    other = build_model(5, 3)  # another number of features
    optimizer = tf.keras.optimizers.legacy.Adam()
    other.compile(optimizer, "sparse_categorical_crossentropy")
    other_state, _ = checkpoints.training_state(other, optimizer)
    with pytest.raises(checkpoints.CheckpointError) as info:
        checkpoints.restore(other_state, checkpoints.newest(str(tmp_path)), str(tmp_path))
    message = str(info.value)
    assert message.startswith(f"checkpoint {tmp_path}/epoch-000001 does not fit this model/optimizer (")
    assert message.endswith(f"delete {tmp_path} to start from scratch")
