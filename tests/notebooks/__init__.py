"""Tests of notebooks/: each notebook runs top to bottom (slow: it runs the whole pipeline
locally).

    .venv/bin/pytest tests/notebooks -q
"""
