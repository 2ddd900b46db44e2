"""The PyTorch room's training augmentation (training_torch/augment.py): the TensorFlow room's
crop + flip under the same hyperparameter, on training image batches only."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pipeline.local.hosts.torchrun import free_port
from tests.training_entry.helpers import make_image_splits, make_splits

torch = pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]


def _images(n: int = 16, size: int = 32) -> torch.Tensor:
    # Every pixel distinct along the width, so a flip or a shift shows.
    row = torch.arange(size, dtype=torch.uint8) * 7 + 1
    return row.view(1, 1, size, 1).expand(n, size, size, 3).clone()


def test_the_crop_margin_is_the_tensorflow_room_s():
    """Restated, not imported: the room must not import TensorFlow (an import-linter contract)."""
    from training_torch import augment

    source = (REPO / "training_entry" / "input" / "images.py").read_text()
    assert float(re.search(r"^CROP_MARGIN = ([0-9.]+)", source, re.MULTILINE).group(1)) == augment.CROP_MARGIN


def test_crop_flip_changes_a_training_batch_and_keeps_its_shape_and_pixels_scale():
    from training_torch import augment

    x = _images()
    out = augment.batch(x, "crop_flip", torch.Generator().manual_seed(0))
    assert out.shape == x.shape and out.dtype == x.dtype
    changed = [not torch.equal(a, b) for a, b in zip(out, x, strict=True)]
    assert sum(changed) >= len(x) // 2  # a draw of offset 0, no flip leaves an image as it was
    assert set(out.unique().tolist()) <= set(x.unique().tolist()) | {0}  # moved pixels and the zero padding
    assert torch.equal(x, _images())  # the input batch itself is untouched
    # Seeded: the same generator state, the same batch.
    assert torch.equal(out, augment.batch(x, "crop_flip", torch.Generator().manual_seed(0)))


def test_crop_never_mirrors_and_none_is_the_identity():
    from training_torch import augment

    x = _images(n=64)
    out = augment.batch(x, "crop", torch.Generator().manual_seed(1))
    # Without a flip each row still rises left to right wherever the crop left pixels.
    for image in out:
        row = image[image.shape[0] // 2, :, 0]
        kept = row[row > 0]
        assert torch.all(kept[1:] > kept[:-1])
    flipped = augment.batch(x, "crop_flip", torch.Generator().manual_seed(1))
    assert any(torch.all(img[16, 8:24, 0][1:] < img[16, 8:24, 0][:-1]) for img in flipped)
    assert augment.batch(x, "none", torch.Generator()) is x


@pytest.mark.parametrize(("kind", "augmentation", "applies"), [
    ("image", "crop_flip", True), ("image", "crop", True), ("image", "none", False),
    ("table", "crop_flip", False), ("table", "none", False),
])
def test_only_image_records_are_augmented(kind, augmentation, applies):
    from training_torch import augment

    assert augment.applies(kind, augmentation) is applies


def test_an_unknown_augmentation_is_refused_with_the_choices():
    from training_torch import augment

    with pytest.raises(ValueError, match="augmentation=flip is not one of crop_flip, crop, none"):
        augment.applies("image", "flip")


def _train_in_process(tmp_path: Path, splits: dict, monkeypatch, *args: str) -> list[torch.Tensor]:
    """train.main on one gloo rank in this process; returns every batch augment.batch was given."""
    from training_torch import augment, train

    given = []
    real = augment.batch

    def spy(x, augmentation, generator):
        given.append(x.clone())
        return real(x, augmentation, generator)

    monkeypatch.setattr(augment, "batch", spy)
    for key in [k for k in os.environ if k.startswith("SM_")]:
        monkeypatch.delenv(key)
    for key, value in {"SM_CHANNEL_TRAIN": splits["train"], "SM_CHANNEL_VALIDATION": splits["validation"],
                       "SM_CHANNEL_MANIFEST": splits["manifest"], "SM_MODEL_DIR": tmp_path / "model",
                       "SM_CHANNEL_INIT": tmp_path / "no-init", "RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0,
                       "LOCAL_WORLD_SIZE": 1, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": free_port()}.items():
        monkeypatch.setenv(key, str(value))
    assert train.main(["--epochs", "2", "--batch-size", "16", *args]) == 0
    return given


def test_training_batches_of_images_are_augmented_and_validation_is_not(tmp_path, monkeypatch):
    """Every training step's batch goes through augment.batch once (2 epochs x 3 steps of 16 out
    of 48 records) and no validation image does: validation is evaluated on the images as decoded."""
    from training_entry.input import records
    from training_torch import data

    splits = make_image_splits(tmp_path / "splits", 1, {"train": 48, "validation": 20, "test": 4})
    given = _train_in_process(tmp_path, splits, monkeypatch)
    assert [len(x) for x in given] == [16] * 6
    train = data.load([str(p) for p in sorted(splits["train"].iterdir())], records.KIND_IMAGE, 32)
    val = data.load([str(p) for p in sorted(splits["validation"].iterdir())], records.KIND_IMAGE, 32)
    rows = {bytes(x.numpy()) for x in train.x}
    assert all(bytes(x.numpy()) in rows for batch in given for x in batch)  # training images, as decoded
    assert not {bytes(x.numpy()) for x in val.x} & {bytes(x.numpy()) for batch in given for x in batch}
    assert _train_in_process(tmp_path, splits, monkeypatch, "--augmentation", "none") == []


def test_tables_are_never_augmented(tmp_path, monkeypatch):
    splits = make_splits(tmp_path / "splits", shard_count=1)
    assert _train_in_process(tmp_path, splits, monkeypatch) == []
