"""Tests of pipeline/costs/advisor (step model, fit, knee, recommendation, `trainpipe advise`).

    PYTHONPATH=$PWD .venv/bin/pytest tests/pipeline/advisor -q
"""
