"""``python -m pipeline`` is ``trainpipe``."""

from pipeline.cli.main import run

run()
