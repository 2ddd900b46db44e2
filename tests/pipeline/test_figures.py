"""The evaluation report's pictures (``pipeline/figures.py``), and the notebook's names for them."""

from __future__ import annotations

import pytest

from pipeline import figures, notebook
from pipeline.figures import confusion_matrix_figure, misclassified_figure
from tests.pipeline.test_notebook import REPORT, image_report_and_files


def test_the_notebook_shows_the_same_figures():
    assert notebook.confusion_matrix_figure is figures.confusion_matrix_figure
    assert notebook.misclassified_figure is figures.misclassified_figure


def test_the_confusion_matrix_shows_every_count_with_class_names():
    document, _ = image_report_and_files()
    axes = confusion_matrix_figure(document).axes[0]
    assert [t.get_text() for t in axes.texts] == ["3", "0", "1", "1", "2", "0", "0", "0", "3"]
    assert [t.get_text() for t in axes.get_yticklabels()] == ["cat", "dog", "zebra finch"]
    assert axes.get_title() == "test accuracy 0.800, top-2 0.900 (10 records)"
    with pytest.raises(ValueError, match="no confusion matrix"):
        confusion_matrix_figure(REPORT | {"confusion_matrix": None})


def test_the_misclassified_grid_shows_each_image_titled_true_to_predicted():
    document, files = image_report_and_files()
    figure = misclassified_figure(list(zip(document["misclassified"], files.values(), strict=True)), columns=8)
    shown = [a for a in figure.axes if a.images]
    assert [a.get_title() for a in shown] == ["cat -> zebra finch\n91%", "dog -> cat\n55%"]
    assert shown[0].images[0].get_array().shape == (6, 8)  # greyscale, as stored
    assert shown[1].images[0].get_array().shape == (5, 5, 3)
    with pytest.raises(ValueError, match="no misclassified images"):
        misclassified_figure([])
