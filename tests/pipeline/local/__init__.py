"""Tests of the Docker-free local runner (pipeline/local/).

    .venv/bin/pytest tests/pipeline/local -q            (add -m "not slow" for unit tests only)
"""
