"""Photos that installed packages ship (no download), centre-cropped and resized to 224 px as
the EfficientNet evaluation does, with the ImageNet classes a person would accept as the
answer (indices of the standard 1000-class list)."""

from __future__ import annotations

import numpy as np
import pytest

SIZE = 224
# name -> acceptable top-1 ImageNet classes.
EXPECTED = {
    "chelsea": {281: "tabby", 282: "tiger cat", 285: "Egyptian cat"},
    "coffee": {967: "espresso", 968: "cup", 504: "coffee mug"},
    "rocket": {657: "missile", 744: "projectile", 812: "space shuttle"},
    "flower": {985: "daisy"},
}


def load() -> tuple[list[str], np.ndarray]:
    """(names, float32 [n, 224, 224, 3] RGB pixels in 0..255): scikit-image's chelsea (a cat),
    coffee, astronaut and rocket, scikit-learn's china (a temple) and flower."""
    data = pytest.importorskip("skimage.data")
    from PIL import Image
    from sklearn.datasets import load_sample_images

    sample = load_sample_images()
    photos = {"chelsea": data.chelsea(), "coffee": data.coffee(), "astronaut": data.astronaut(),
              "rocket": data.rocket(), "china": sample.images[0], "flower": sample.images[1]}
    out = []
    for img in photos.values():
        img = img[..., :3]
        h, w = img.shape[:2]
        side = min(h, w)
        top, left = (h - side) // 2, (w - side) // 2
        square = Image.fromarray(img[top:top + side, left:left + side])
        out.append(np.asarray(square.resize((SIZE, SIZE), Image.BICUBIC), dtype=np.float32))
    return list(photos), np.stack(out)


def crops(name: str, count: int, size: int, half: str, seed: int = 0) -> np.ndarray:
    """``count`` random square crops (40-70 % of the short side) of a packaged photo, from its
    ``left`` or ``right`` half only, so training and held-out crops share no pixel; float32
    [count, size, size, 3] in 0..255."""
    data = pytest.importorskip("skimage.data")
    from PIL import Image

    img = getattr(data, name)()[..., :3]
    h, w = img.shape[:2]
    img = img[:, : w // 2] if half == "left" else img[:, w // 2:]
    h, w = img.shape[:2]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        side = int(min(h, w) * rng.uniform(0.4, 0.7))
        top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = Image.fromarray(img[top:top + side, left:left + side]).resize((size, size), Image.BILINEAR)
        out.append(np.asarray(crop, dtype=np.float32))
    return np.stack(out)


def two_class_split(size: int, count: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cat (chelsea) against coffee: training crops from the photos' left halves, held-out
    crops from their right halves. (x_train, y_train, x_val, y_val), labels 0 = cat."""
    x_train = np.concatenate([crops("chelsea", count, size, "left", 1), crops("coffee", count, size, "left", 2)])
    x_val = np.concatenate([crops("chelsea", count, size, "right", 3), crops("coffee", count, size, "right", 4)])
    y = np.repeat([0, 1], count)
    return x_train, y, x_val, y.copy()
