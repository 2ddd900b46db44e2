"""Tests of evaluation/: model archive handling, scoring the test shards, evaluation.json.

    .venv/bin/pytest tests/evaluation -q     (under 10 s: saves and loads small Keras models)
"""
