"""The evaluation report's pictures, pyplot-free: the confusion matrix and the grid of
misclassified test images. The notebook shows them (``pipeline/notebook.py`` re-exports both) and
the tracking logs them as artifacts (``pipeline/tracking/records.py``); a module of their own so
that neither of those two imports the other (an import contract in pyproject.toml holds
tracking to it). matplotlib is imported only when a picture is drawn."""

from __future__ import annotations

import io

from evaluation import report


def confusion_matrix_figure(evaluation: dict):
    """evaluation.json's confusion matrix (rows: true class, columns: predicted), each cell's
    count written in it; the title gives accuracy and top-k accuracy."""
    from matplotlib.figure import Figure

    matrix = evaluation.get("confusion_matrix")
    if not matrix:
        raise ValueError("this evaluation report has no confusion matrix (written before trainpipe reported one)")
    names = evaluation.get("class_names") or [str(i) for i in range(len(matrix))]
    size = min(12.0, max(4.0, 0.55 * len(names) + 2))
    figure = Figure(figsize=(size, size * 0.85))
    axes = figure.subplots()
    image = axes.imshow(matrix, cmap="Blues")
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    largest = max(max(row) for row in matrix) or 1
    if len(names) <= 30:  # beyond that the numbers would not fit in their cells
        for i, row in enumerate(matrix):
            for j, count in enumerate(row):
                axes.text(j, i, str(count), ha="center", va="center", fontsize=8,
                          color="white" if count > largest / 2 else "black")
    axes.set_xticks(range(len(names)), [_short(n) for n in names], rotation=90 if len(names) > 8 else 0)
    axes.set_yticks(range(len(names)), [_short(n) for n in names])
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    metrics = evaluation.get("metrics", {})
    title = f"test accuracy {report.read_json_path(evaluation, report.ACCURACY_JSON_PATH):.3f}"
    if "top_k_accuracy" in metrics:
        title += f", top-{metrics['top_k_accuracy']['k']} {metrics['top_k_accuracy']['value']:.3f}"
    axes.set_title(f"{title} ({evaluation.get('records', '?')} records)", fontsize=10)
    figure.tight_layout()
    return figure


def misclassified_figure(misclassified: list[tuple[dict, bytes]], columns: int = 8):
    """A grid of misclassified test images (``RunResults.misclassified``), each titled
    ``true -> predicted`` and the model's confidence in its wrong answer."""
    from matplotlib.figure import Figure
    from PIL import Image  # matplotlib's own image reader: installed wherever matplotlib is

    if not misclassified:
        raise ValueError("no misclassified images to show (a table run, or every test image right)")
    columns = min(columns, len(misclassified))
    rows = -(-len(misclassified) // columns)
    figure = Figure(figsize=(1.6 * columns, 1.9 * rows))
    grid = figure.subplots(rows, columns, squeeze=False)
    for axes in grid.flat:
        axes.set_axis_off()
    for axes, (entry, data) in zip(grid.flat, misclassified, strict=False):
        image = Image.open(io.BytesIO(data))
        image.load()
        axes.imshow(image, cmap="gray" if image.mode in ("L", "I;16", "I") else None)
        axes.set_title(f"{_short(entry['class_name'], 12)} -> {_short(entry['predicted_class_name'], 12)}\n"
                       f"{entry['confidence']:.0%}", fontsize=8)
    figure.suptitle("misclassified test images (true -> predicted, confidence), most confident first", fontsize=9)
    figure.tight_layout()
    return figure


def _short(text: str, limit: int = 14) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Results of a run: local ----------------------------------------------------------------------
