"""What every input pipeline of a rank needs to know: its hosts, FIFOs, record shape and seed.

Python 3.10 syntax.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from training_entry.config import Hosts

# Records a training pass shuffles among at most (File, Pipe and PipeModeDataset alike).
SHUFFLE_BUFFER = 10_000


@dataclass
class InputContext:
    """The job's facts every dataset of this rank is built from (one per job, shared by all fits)."""

    hosts: Hosts
    fifo_dir: str
    config_dir: str
    private_dir: str
    num_features: int
    seed: int
    image_size: int | None = None  # image records: decoded and resized to this, per record
    augmentation: str = "crop_flip"  # image records, training only (contract.AUGMENTATIONS)
    # Table records of typed columns: the manifest's schema (``typed_examples``); None: float vectors.
    columns: tuple | None = None
    # Pipe: one reader per channel for the whole job, so a second model.fit (the next
    # transfer-learning phase) opens the channel's next FIFO, not <channel>_0 again.
    pipe_readers: dict = field(default_factory=dict)

    def cleanup(self) -> None:
        shutil.rmtree(self.private_dir, ignore_errors=True)

