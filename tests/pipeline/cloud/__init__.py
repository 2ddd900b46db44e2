"""Tests of pipeline/cloud and the cloud commands (upsert, start, status, executions, diff).

Every AWS call goes to a local moto server over HTTP (tests/moto_aws.py); no account needed.

    .venv/bin/pytest tests/pipeline/cloud -q
"""
