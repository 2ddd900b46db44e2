"""Tests of the training entry point (``training_entry/``).

    .venv/bin/pytest tests/training_entry -m "not slow"   unit tests (seconds)
    .venv/bin/pytest tests/training_entry -m slow         mpirun runs of train.py (~2 min)
    .venv/bin/pytest tests/training_entry --durations=10  both, slowest listed

The slow tests build per-host /opt/ml trees with ``pipeline.local.jobs.contract`` (the config JSON
and SM_* environment as the SageMaker toolkit writes them), shards and manifests with
``processing.preprocess`` on scikit-learn's digits, then launch ``mpirun -np 2`` on
``training_entry/train.py``; Pipe channels are fed by a thread that writes each host's shards
into per-pass FIFOs ``<channel>_0, _1, ...`` the way SageMaker does (``helpers.PipeFeeder``).
"""
