"""Tests of pipeline/costs (prices, energy and carbon factors, per-job accounting).

    PYTHONPATH=$PWD .venv/bin/pytest tests/pipeline/costs -q
"""
