"""Tests of ``benchmarks/`` and of the fast local launch settings (``pipeline/local/hosts/launch_settings.py``).

    .venv/bin/pytest tests/benchmarks -m "not slow"   tuning rules and the pinning shim (seconds)
    .venv/bin/pytest tests/benchmarks -m slow         every benchmark script on tiny sizes (~3 min)

The smoke tests check that each script runs and ends with its ``RESULT`` lines; they never
look at a time or a ratio (the machine is shared: figures are for BENCHMARKS.md, not asserts).
"""
