"""``python -m pipeline`` is ``trainpipe``."""

from pipeline.cli import run

run()
