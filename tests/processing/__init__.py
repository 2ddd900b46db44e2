"""Tests of processing/: raw data checks, the stratified split, shards, manifests, hosts.

    .venv/bin/pytest tests/processing -q     (under 10 s; no network, no GPU)
"""
