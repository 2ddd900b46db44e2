"""trainpipe's test suite; folders mirror the source tree.

    make test                      lint, import contracts, then everything
    .venv/bin/pytest -m "not slow" unit tests only (seconds)
    .venv/bin/pytest tests/pipeline one folder
"""
