"""One builder per step of the DAG; ``pipeline/definition.py`` wires them.

Each module builds one step (or, for the gate, the condition with its two branches) from a
:class:`~pipeline.steps.context.BuildContext` and the upstream steps it reads from, so a new
step or a new architecture changes one builder.
"""
