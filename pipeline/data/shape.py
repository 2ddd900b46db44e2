"""What the training job will see of the data, as far as it is known before any job: a
module of its own so that ``pipeline.definition`` (which never imports the local runner's
storage) can take it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataShape:
    """The data as the training job will see it; None where unknown before processing."""

    kind: str  # records.KIND_*
    class_names: tuple[str, ...] | None = None
    num_features: int | None = None  # tables: feature columns (the header less the label)
    train_records: int | None = None  # records the processing step puts in the train split
    source: str = ""  # where the shape was read, for messages
    # Tables: categorical columns or gaps (processing writes typed columns, encoded inside the
    # model); None where not looked at.
    typed: bool | None = None

    @property
    def num_classes(self) -> int | None:
        return len(self.class_names) if self.class_names is not None else None
