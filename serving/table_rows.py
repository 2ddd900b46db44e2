"""CSV lines for a table model of typed columns (its ``serving_csv``), checked against the
columns it was trained on before TensorFlow parses them.

Training writes the columns beside the SavedModel (``contract.SERVING_TABLE_FILE``: every
column a line holds, in the training header's order, and the label column). With them a
header line is recognised by its names and skipped, as the float-table path skips a first line
that is not numbers, and a line with the wrong number of values is refused with what the model
takes: the count, the names, and the label column to drop. A model saved without the file (an
older one) gets TensorFlow's own words (model.py).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from serving.web import RequestError
from training_entry import contract


def load_description(version_dir: Path) -> dict | None:
    """The table description saved beside the model, or None (not a table, or saved before it)."""
    path = Path(version_dir) / contract.SERVING_TABLE_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("columns"), list) else None


def takes(description: dict) -> str:
    """``7 columns: island, bill_length_mm, ... (the training header's order)``."""
    columns = description["columns"]
    return f"{len(columns)} columns: {', '.join(map(str, columns))} (the training header's order)"


def _cells(line: str) -> list[str]:
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return []


def _is_header(cells: list[str], description: dict) -> bool:
    """Every column's name is among the line's cells (with the label's, a training CSV's own header)."""
    names = {c.strip().lower() for c in cells}
    return all(str(column).strip().lower() in names for column in description["columns"])


def row_name(row: int, line: int | None = None) -> str:
    """``CSV row N``: the Nth row of values, as the answers number them (``file:N`` in
    ``predict``, the Nth prediction): a header and blank lines are not rows. Where the body's
    line differs, it is said too, for an editor's line numbers."""
    return f"CSV row {row}" + (f" (line {line} of the body)" if line is not None and line != row else "")


def checked_lines(lines: list[str], description: dict | None, line_numbers: list[int] | None = None) -> list[str]:
    """``lines`` without a first header line; ``RequestError`` for a line of the wrong width.
    ``line_numbers``: each line's in the body (blank lines dropped before); default 1, 2, ..."""
    if description is None:
        return lines
    numbers = line_numbers or list(range(1, len(lines) + 1))
    if _is_header(_cells(lines[0]), description):
        lines, numbers = lines[1:], numbers[1:]
        if not lines:
            raise RequestError(f"the CSV body is only a header line; send rows of {takes(description)}")
    width, label = len(description["columns"]), description.get("label_column")
    for row, (line, number) in enumerate(zip(lines, numbers, strict=True), 1):
        count = len(_cells(line))
        if count == width:
            continue
        hint = (f"; drop the label column {label!r}" if label and count == width + 1
                else "; the label column is left out" if label else "")
        raise RequestError(f"{row_name(row, number)} has {count} values; the model takes {takes(description)}{hint}")
    return lines
