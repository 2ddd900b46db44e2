"""Steps the local runner cannot execute (EMR, a Lambda with no handler, a CreateModel of an image
it cannot serve, an ``@step`` function or a built-in algorithm (``training_kinds.py``; an ``@step``
also for what the store holds, ``judge_stored``), ...).

They are refused before the run only when the run can reach them and nothing says what to
do. A step is unreachable when it sits in the branch of a condition whose outcome is already
known before the run (its conditions read only parameters and literals: e.g. a Lambda that
deploys only when ``-p Deploy=true``). ``--stub-unsupported`` says what to do with the rest:

- ``succeed``: the step is marked Succeeded without running, its declared outputs empty
  (``OutputParameters`` of Lambda and Callback steps are empty strings) unless
  ``--stub NAME.OUTPUT=VALUE`` gives them (a step given values that way is stubbed as
  Succeeded without the flag); steps that read other properties of it fail then, naming them;
- ``skip``: the step is NotExecuted, and so is every step that depends on it. The execution
  then never ends Succeeded, since SageMaker would have run those steps: it ends ``Stopped``,
  SageMaker's state for an execution that ended before all its steps ran with none failing (the
  state ``StopPipelineExecution`` leaves), and its reason names the steps skipped.

Either way the summary shows the step as stubbed.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from pipeline.local.dag import inference, interpreter, preflight, training_kinds
from pipeline.local.dag.interpreter import (
    STEP_CONDITION,
    STEP_TRAINING,
    SUPPORTED_STEP_TYPES,
    Context,
    DefinitionError,
    ExpressionError,
    StepNode,
)

SUCCEED, SKIP = "succeed", "skip"
MODES = (SUCCEED, SKIP)
FLAG = "--stub-unsupported"
VALUE_FLAG = "--stub"


# Run locally though SageMaker's local mode refuses them: Callback steps always, Lambda steps
# given a handler (``local``: their names; the runner's lambda_steps.py runs both).
CALLBACK, LAMBDA = "Callback", "Lambda"


# @step functions that cannot run for what the store holds (a requirement the runner's environment
# lacks, pre-execution commands, ...: training_kinds.function_step_refusal), judged once per run
# (``judge_stored``) and unsupported from then on like the rest, so --stub-unsupported applies.
# By the node's id, holding the node (a StepNode's body is a dict: it has no hash), so that an id
# is never another node's while its entry lives.
_STORED_REFUSALS: dict[int, tuple[StepNode, str]] = {}


def judge_stored(nodes: list[StepNode], ctx: Context, storage) -> None:
    """Judge each @step function against the run's store (``storage``) before ``check``."""
    for node in nodes if storage is not None else ():
        if training_kinds.is_function_step(node):
            why = training_kinds.function_step_refusal(preflight.known_request(node, ctx), storage)
            if why:
                _STORED_REFUSALS[id(node)] = (node, why)


def _stored_refusal(node: StepNode) -> str:
    found = _STORED_REFUSALS.get(id(node))
    return found[1] if found is not None and found[0] is node else ""


def unsupported(node: StepNode, local: Container[str] = ()) -> bool:
    if node.type == CALLBACK or node.type == LAMBDA and node.name in local:
        return False
    return node.type not in SUPPORTED_STEP_TYPES or bool(_unservable(node))


def _unservable(node: StepNode) -> str:
    """Why a Model step's container, or a Training step's code, does not run locally ("" when it
    does: inference.py, training_kinds.py)."""
    if node.type == STEP_TRAINING:
        return training_kinds.why_not_local(node) or _stored_refusal(node)
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


def parse_values(items: list[str]) -> dict[str, dict[str, str]]:
    """``--stub NAME.OUTPUT=VALUE`` (repeated) -> {step: {output: value}}."""
    values: dict[str, dict[str, str]] = {}
    for item in items:
        target, sep, value = item.partition("=")
        step, dot, output = target.rpartition(".")
        if not sep or not dot or not step or not output:
            raise DefinitionError(f"{VALUE_FLAG} {item!r}: expected STEP.OUTPUT=VALUE, e.g. "
                                  f"{VALUE_FLAG} CheckData.status=ok")
        values.setdefault(step, {})[output] = value
    return values


def _declared(node: StepNode) -> list[str]:
    declared = node.body.get("OutputParameters") or []
    return [o.get("OutputName") for o in declared if isinstance(o, Mapping) and o.get("OutputName")]


def check_values(nodes: list[StepNode], values: Mapping[str, Mapping[str, str]],
                 local: Container[str] = ()) -> None:
    """Each ``--stub`` names a step that does not run here and one of its declared outputs."""
    by_name = {n.name: n for n in nodes}
    for step, outputs in values.items():
        node = by_name.get(step)
        if node is None or not unsupported(node, local):
            which = "no step" if node is None else f"{node.type} step {step}, which runs locally"
            stubbable = ", ".join(n.name for n in nodes if unsupported(n, local)) or "none"
            raise DefinitionError(f"{VALUE_FLAG} {step}.…: the definition has {which}; "
                                  f"steps that can be stubbed: {stubbable}")
        unknown = sorted(set(outputs) - set(_declared(node)))
        if unknown:
            raise DefinitionError(f"{VALUE_FLAG} {step}.{unknown[0]}: {node.type} step {step} declares "
                                  f"no output {unknown[0]!r} (its OutputParameters: "
                                  f"{', '.join(_declared(node)) or 'none'})")


def check(nodes: list[StepNode], ctx: Context, mode: str | None,
          values: Mapping[str, Mapping[str, str]] | None = None, local: Container[str] = ()) -> list[StepNode]:
    """The unsupported steps the run can reach; refused (one line) when ``mode`` is None and
    ``--stub`` gives no values for them."""
    if mode is not None and mode not in MODES:
        raise DefinitionError(f"{FLAG} {mode!r}: must be one of {', '.join(MODES)}")
    check_values(nodes, values or {}, local)
    by_name = {n.name: n for n in nodes}
    outcomes = known_outcomes(nodes, ctx)
    found = [n for n in nodes if unsupported(n, local) and reachable(n, by_name, outcomes)]
    refused = [n for n in found if n.name not in (values or {})]
    if refused and mode is None:
        listed = ", ".join(_listed(n) for n in refused)
        raise DefinitionError(
            f"the local runner cannot run step {listed}; it runs these step types: "
            f"{', '.join(SUPPORTED_STEP_TYPES)}. Pass {FLAG} {SUCCEED} (marked Succeeded, outputs "
            f"empty, or given with {VALUE_FLAG} STEP.OUTPUT=VALUE) or {FLAG} {SKIP} (NotExecuted, "
            f"with the steps that need it; the execution then ends Stopped)")
    return found


def mode_for(node: StepNode, mode: str | None, values: Mapping[str, Mapping[str, str]]) -> str | None:
    """How this step is stubbed: given values make it Succeeded; else the flag's mode."""
    return SUCCEED if node.name in values else mode


def properties(node: StepNode, values: Mapping[str, str] | None = None) -> dict:
    """What a stubbed-as-succeeded step offers later steps: its declared outputs, as given
    with ``--stub``, else empty."""
    names = _declared(node)
    return {"OutputParameters": {name: (values or {}).get(name, "") for name in names}} if names else {}


def detail(node: StepNode, mode: str, values: Mapping[str, str] | None = None) -> str:
    # A step of a type that runs locally says why this one does not (an @step's missing requirement).
    why = _unservable(node) or f"{node.type} steps do not run locally"
    if values:
        given = ", ".join(f"{k}={v}" for k, v in values.items())
        return f"stubbed ({VALUE_FLAG} {given}): {why}"
    return f"stubbed ({FLAG} {mode}): {why}"


def skipped_reason(names: list[str]) -> str:
    """Why an execution that skipped steps ends Stopped (the run's last line)."""
    return (f"{FLAG} {SKIP} left {len(names)} step(s) not run ({', '.join(names)}); SageMaker would "
            f"have run them, so this execution is Stopped (SageMaker's state for an execution that "
            f"ended before all its steps ran, none failing), not Succeeded")
