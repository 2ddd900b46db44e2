"""One builder per step of the DAG; ``pipeline/definition/build.py`` wires them.

Each module builds one step (or, for the gate, the condition with its two branches) from a
:class:`~pipeline.definition.steps.context.BuildContext` and the upstream steps it reads from, so a new
step or a new architecture changes one builder.
"""
