"""The ``trainpipe`` command line: ``main`` dispatches, each other module is one group of commands."""
