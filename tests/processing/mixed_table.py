"""A synthetic mixed-type CSV: string labels in the first column, a categorical column that
carries the signal, numeric and categorical noise, 5% missing values (``NA``, empty, ``?``).

A numeric-only model cannot beat chance on it (the numeric columns are noise drawn the same
way for every class); the island decides the species, so a model that encodes the categorical
column reaches ~0.95 + 0.05/3 (a missing island leaves a guess).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIES = ("Adelie", "Chinstrap", "Gentoo")
ISLANDS = tuple(f"island-{i:02d}" for i in range(12))  # island i -> species i % 3
HEADER = ("species", "island", "bill_length_mm", "body_mass_g", "sex", "flipper_mm")
MISSING_TOKENS = ("NA", "", "?", "null")


def rows(count: int, seed: int = 0, missing: float = 0.05) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    island = rng.integers(0, len(ISLANDS), count)
    species = island % len(SPECIES)
    bill = rng.normal(44.0, 5.0, count)
    mass = rng.normal(4200.0, 800.0, count)
    flipper = rng.integers(170, 232, count)
    sex = rng.choice(["male", "female"], count)
    gaps = rng.random((count, len(HEADER) - 1)) < missing
    out = []
    for i in range(count):
        cells = [ISLANDS[island[i]], f"{bill[i]:.1f}", f"{mass[i]:.0f}", str(sex[i]), str(int(flipper[i]))]
        cells = [MISSING_TOKENS[(i + j) % len(MISSING_TOKENS)] if gaps[i, j] else c for j, c in enumerate(cells)]
        out.append([SPECIES[species[i]], *cells])
    return out


def write(path: Path, count: int, seed: int = 0, missing: float = 0.05) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(",".join(HEADER) + "\n")
        for row in rows(count, seed, missing):
            f.write(",".join(row) + "\n")
    return path
