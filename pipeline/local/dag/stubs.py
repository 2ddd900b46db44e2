"""Steps the local runner cannot execute (Lambda, Callback, EMR, a CreateModel of an image it cannot serve, ...).

They are refused before the run only when the run can reach them and nothing says what to
do. A step is unreachable when it sits in the branch of a condition whose outcome is already
known before the run (its conditions read only parameters and literals: e.g. a Lambda that
deploys only when ``-p Deploy=true``). ``--stub-unsupported`` says what to do with the rest:

- ``succeed``: the step is marked Succeeded without running, its declared outputs empty
  (``OutputParameters`` of Lambda and Callback steps are empty strings); steps that read
  other properties of it fail then, naming them;
- ``skip``: the step is NotExecuted, and so is every step that depends on it.

Either way the summary shows the step as stubbed.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.local.dag import inference, interpreter
from pipeline.local.dag.interpreter import (
    STEP_CONDITION,
    SUPPORTED_STEP_TYPES,
    Context,
    DefinitionError,
    ExpressionError,
    StepNode,
)

SUCCEED, SKIP = "succeed", "skip"
MODES = (SUCCEED, SKIP)
FLAG = "--stub-unsupported"


def unsupported(node: StepNode) -> bool:
    return node.type not in SUPPORTED_STEP_TYPES or bool(_unservable(node))


def _unservable(node: StepNode) -> str:
    """Why a Model step's container does not run locally ("" when it does: inference.py)."""
    if node.type != inference.STEP_MODEL:
        return ""
    kind, why = inference.model_kind(node.body.get("Arguments") or {})
    return "" if kind else why


def _listed(node: StepNode) -> str:
    why = _unservable(node)
    return f"{node.name} (Type {node.type}" + (f": {why})" if why else ")")


def known_outcomes(nodes: list[StepNode], ctx: Context) -> dict[str, bool]:
    """Conditions decided before the run: those that read no step."""
    outcomes = {}
    for node in nodes:
        if node.type != STEP_CONDITION:
            continue
        conditions = node.body.get("Arguments", {}).get("Conditions", [])
        if any(interpreter.step_references(conditions)):
            continue
        try:
            outcomes[node.name], _ = interpreter.evaluate_conditions(conditions, ctx)
        except ExpressionError:
            continue
    return outcomes


def reachable(node: StepNode, by_name: Mapping[str, StepNode], outcomes: Mapping[str, bool]) -> bool:
    """False when a condition above the step is decided, the other way, before the run."""
    while node.branch is not None:
        condition, branch = node.branch
        if condition in outcomes and outcomes[condition] != branch:
            return False
        node = by_name[condition]
    return True


def check(nodes: list[StepNode], ctx: Context, mode: str | None) -> list[StepNode]:
    """The unsupported steps the run can reach; refused (one line) when ``mode`` is None."""
    if mode is not None and mode not in MODES:
        raise DefinitionError(f"{FLAG} {mode!r}: must be one of {', '.join(MODES)}")
    by_name = {n.name: n for n in nodes}
    outcomes = known_outcomes(nodes, ctx)
    found = [n for n in nodes if unsupported(n) and reachable(n, by_name, outcomes)]
    if found and mode is None:
        listed = ", ".join(_listed(n) for n in found)
        raise DefinitionError(
            f"the local runner cannot run step {listed}; it runs these step types: "
            f"{', '.join(SUPPORTED_STEP_TYPES)}. Pass {FLAG} {SUCCEED} (marked Succeeded, outputs "
            f"empty) or {FLAG} {SKIP} (NotExecuted, with the steps that need it)")
    return found


def properties(node: StepNode) -> dict:
    """What a stubbed-as-succeeded step offers later steps: its declared outputs, empty."""
    declared = node.body.get("OutputParameters") or []
    names = [o.get("OutputName") for o in declared if isinstance(o, Mapping) and o.get("OutputName")]
    return {"OutputParameters": {name: "" for name in names}} if names else {}


def detail(node: StepNode, mode: str) -> str:
    return f"stubbed ({FLAG} {mode}): {node.type} steps do not run locally"
