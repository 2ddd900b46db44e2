"""Tests of pipeline/: parameters, settings, bundles, the definition, the CLI.

    .venv/bin/pytest tests/pipeline -q
"""
