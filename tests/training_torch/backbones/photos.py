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
