"""Tests of the install scripts (``scripts/``) that can run without rebuilding .venv.

    .venv/bin/pytest tests/scripts      (seconds: a bare venv and a C compile)
"""
