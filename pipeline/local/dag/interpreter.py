"""Read a pipeline definition JSON the way SageMaker Pipelines does: parameters, expressions,
conditions and the order of steps. No step runs here (see ``runner.py``).

Expressions (what the SDK emits into a definition):

- ``{"Get": "Parameters.Name"}``, ``{"Get": "Execution.PipelineExecutionId"}``,
  ``{"Get": "Steps.<step>.<property path>"}`` with ``.Field``, ``['key']`` and ``[0]``, e.g.
  ``Steps.PreprocessData.ProcessingOutputConfig.Outputs['train'].S3Output.S3Uri``; a string key
  on a list selects the element whose ``*Name`` field (OutputName, ChannelName, ...) matches.
- ``{"Std:Join": {"On": sep, "Values": [...]}}``.
- ``{"Std:JsonGet": {"PropertyFile": {"Get": "Steps.<step>.PropertyFiles.<name>"} | "S3Uri": ...,
  "Path": "a.b[0].c"}}``: reads the JSON file that step wrote.
- Conditions: Equals, GreaterThan(OrEqualTo), LessThan(OrEqualTo), In, Not, Or.

Step order comes from the data: a step runs after every step it references (``Get``/JsonGet)
and every step in its ``DependsOn``; steps in a condition's ``IfSteps``/``ElseSteps`` run only
when that branch is taken. Ties keep the order of the definition.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from pipeline.errors import UserError

STEP_PROCESSING = "Processing"
STEP_TRAINING = "Training"
STEP_CONDITION = "Condition"
STEP_REGISTER_MODEL = "RegisterModel"
STEP_FAIL = "Fail"
STEP_MODEL = "Model"  # CreateModel, and Transform: for the models dag/inference.py can serve
STEP_TRANSFORM = "Transform"
STEP_TUNING = "Tuning"  # a hyperparameter tuning job: its trials are training jobs (tuning_step.py)
SUPPORTED_STEP_TYPES = (STEP_PROCESSING, STEP_TRAINING, STEP_CONDITION, STEP_REGISTER_MODEL, STEP_FAIL,
                        STEP_MODEL, STEP_TRANSFORM, STEP_TUNING)

# SageMaker: the execution variables a definition may reference.
EXECUTION_VARIABLES = (
    "PipelineExecutionId", "PipelineExecutionArn", "PipelineName", "PipelineArn",
    "StartDateTime", "CurrentDateTime", "TrainingJobName", "ProcessingJobName",
)


class DefinitionError(UserError):
    """The definition cannot be run locally (unsupported step type, bad reference, cycle)."""


class ExpressionError(Exception):
    """An expression could not be evaluated at run time; the step that needed it fails."""


class Unresolved(ExpressionError):
    """The expression needs a step that has not run (yet)."""


# --- Parameters ------------------------------------------------------------------------------
def _convert(name: str, kind: str, raw):
    try:
        if kind == "Integer":
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            return int(str(raw).strip())
        if kind == "Float":
            return float(str(raw).strip())
        if kind == "Boolean":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            return text == "true"
        return str(raw)
    except ValueError:
        article = "an" if kind[0] in "AEIOU" else "a"
        raise DefinitionError(f"parameter {name}={raw!r}: expected {article} {kind} value") from None


def resolve_parameters(definition: Mapping, overrides: Mapping[str, object] | None = None) -> dict:
    """The execution's parameter values: the definition's defaults, then ``overrides`` (as
    ``pipeline.start(parameters=...)`` would pass them), each converted to its declared type."""
    declared = {p["Name"]: p for p in definition.get("Parameters", [])}
    unknown = set(overrides or {}) - set(declared)
    if unknown:
        raise DefinitionError(
            f"unknown parameter(s) {', '.join(sorted(unknown))}; "
            f"the definition declares: {', '.join(declared)}"
        )
    values = {}
    for name, spec in declared.items():
        kind = spec.get("Type", "String")
        if overrides and name in overrides:
            values[name] = _convert(name, kind, overrides[name])
        elif "DefaultValue" in spec:
            values[name] = _convert(name, kind, spec["DefaultValue"])
        else:
            raise DefinitionError(f"parameter {name} has no default value; pass -p {name}=VALUE")
    return values


# --- Property paths --------------------------------------------------------------------------
_TOKEN_RE = re.compile(r"""\.?([A-Za-z_$][A-Za-z0-9_\-]*)|\[\s*(?:'([^']*)'|"([^"]*)"|(\d+))\s*\]""")


def parse_path(path: str) -> list[str | int | tuple]:
    """``A.B['k'][0].C`` -> ['A', 'B', ('k',), 0, 'C']: names, quoted keys (1-tuples) and list
    indexes. A leading ``$.`` (JsonPath root) is dropped."""
    text = path[2:] if path.startswith("$.") else path
    tokens: list = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if not match or match.end() == pos:
            raise ExpressionError(f"cannot parse property path {path!r} at {text[pos:]!r}")
        name, quoted1, quoted2, index = match.groups()
        if name is not None:
            tokens.append(name)
        elif index is not None:
            tokens.append(int(index))
        else:
            tokens.append((quoted1 if quoted1 is not None else quoted2,))
        pos = match.end()
    return tokens


_NAME_FIELDS = ("OutputName", "ChannelName", "InputName", "MetricName", "PropertyFileName", "Name")


def lookup(document, tokens: list, where: str):
    """Follow ``tokens`` (from ``parse_path``) into a JSON-like document."""
    value = document
    for token in tokens:
        key = token[0] if isinstance(token, tuple) else token
        if isinstance(value, Mapping) and isinstance(key, str) and key in value or isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        elif isinstance(value, list) and isinstance(key, str):
            matches = [item for item in value if isinstance(item, Mapping)
                       and any(item.get(f) == key for f in _NAME_FIELDS)]
            if not matches:
                names = [next((item.get(f) for f in _NAME_FIELDS if f in item), "?")
                         for item in value if isinstance(item, Mapping)]
                raise ExpressionError(f"{where}: no element named {key!r} (there are: {names})")
            value = matches[0]
        else:
            available = list(value) if isinstance(value, Mapping) else type(value).__name__
            raise ExpressionError(f"{where}: no {key!r} here (available: {available})")
    return value


# --- Evaluation ------------------------------------------------------------------------------
def to_string(value) -> str:
    """How a value reads inside Std:Join (JSON spelling for booleans and null)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@dataclass
class Context:
    """Everything an expression can see during one execution."""

    parameters: Mapping[str, object]
    execution: Mapping[str, object]
    # step name -> its properties document (the Describe*Job response, etc.)
    properties: dict[str, dict] = field(default_factory=dict)
    # step name -> its PropertyFiles declarations from the definition
    property_files: Mapping[str, list] = field(default_factory=dict)
    # s3:// URI -> parsed JSON (JsonGet reads property files through this)
    read_json: Callable[[str], object] | None = None
    _json_cache: dict = field(default_factory=dict)

    def get(self, path: str):
        root, _, rest = path.partition(".")
        if root == "Parameters":
            if rest not in self.parameters:
                raise ExpressionError(f"Get {path}: no parameter {rest!r}")
            return self.parameters[rest]
        if root == "Execution":
            if rest not in self.execution:
                raise ExpressionError(f"Get {path}: execution variable {rest!r} is not available")
            return self.execution[rest]
        if root == "Steps":
            step, _, prop = rest.partition(".")
            if step not in self.properties:
                raise Unresolved(f"Get {path}: step {step} has not run")
            if prop.startswith("PropertyFiles."):
                raise ExpressionError(f"Get {path}: a property file is read with Std:JsonGet")
            return lookup(self.properties[step], parse_path(prop), f"Get {path}")
        raise ExpressionError(f"Get {path}: unknown root {root!r} (Parameters, Execution, Steps)")

    def property_file_uri(self, reference: str) -> str:
        """``Steps.<step>.PropertyFiles.<name>`` -> the s3:// URI of that file."""
        parts = reference.split(".")
        if len(parts) != 4 or parts[0] != "Steps" or parts[2] != "PropertyFiles":
            raise ExpressionError(f"Std:JsonGet: {reference!r} is not Steps.<step>.PropertyFiles.<name>")
        step, name = parts[1], parts[3]
        declared = {p.get("PropertyFileName"): p for p in self.property_files.get(step, [])}
        if name not in declared:
            raise ExpressionError(f"Std:JsonGet: step {step} declares no property file {name!r}")
        if step not in self.properties:
            raise Unresolved(f"Std:JsonGet: step {step} has not run")
        spec = declared[name]
        outputs = lookup(self.properties[step], ["ProcessingOutputConfig", "Outputs"],
                         f"property file {name}")
        output = lookup(outputs, [(spec["OutputName"],)], f"property file {name}")
        return output["S3Output"]["S3Uri"].rstrip("/") + "/" + spec["FilePath"].lstrip("/")

    def json_document(self, uri: str):
        if uri not in self._json_cache:
            if self.read_json is None:
                raise ExpressionError(f"Std:JsonGet: cannot read {uri} here")
            self._json_cache[uri] = self.read_json(uri)
        return self._json_cache[uri]


def evaluate(expr, ctx: Context):
    """The value of an expression; plain JSON values evaluate to themselves."""
    if isinstance(expr, list):
        return [evaluate(item, ctx) for item in expr]
    if not isinstance(expr, dict):
        return expr
    if len(expr) == 1:
        (key, body), = expr.items()
        if key == "Get":
            return ctx.get(body)
        if key == "Std:Join":
            values = evaluate(body.get("Values", []), ctx)
            return str(body.get("On", "")).join(to_string(v) for v in values)
        if key == "Std:JsonGet":
            return _json_get(body, ctx)
    return {key: evaluate(value, ctx) for key, value in expr.items()}


def _json_get(body: Mapping, ctx: Context):
    if "PropertyFile" in body:
        reference = body["PropertyFile"]
        reference = reference.get("Get") if isinstance(reference, dict) else reference
        uri = ctx.property_file_uri(reference)
        source = reference
    elif "S3Uri" in body:
        uri = evaluate(body["S3Uri"], ctx)
        source = uri
    else:
        raise ExpressionError("Std:JsonGet needs a PropertyFile or an S3Uri")
    path = body.get("Path", "")
    try:
        document = ctx.json_document(uri)
    except ExpressionError:
        raise
    except Exception as error:
        raise ExpressionError(f"Std:JsonGet: cannot read {source} ({uri}): {error}") from error
    try:
        return lookup(document, parse_path(path), f"Std:JsonGet {path!r} in {uri}")
    except ExpressionError as error:
        raise ExpressionError(f"Std:JsonGet: path {path!r} not found in {source} ({uri}): {error}") from None


# --- Conditions ------------------------------------------------------------------------------
_COMPARISONS = {
    "Equals": ("==", lambda a, b: a == b),
    "GreaterThan": (">", lambda a, b: a > b),
    "GreaterThanOrEqualTo": (">=", lambda a, b: a >= b),
    "LessThan": ("<", lambda a, b: a < b),
    "LessThanOrEqualTo": ("<=", lambda a, b: a <= b),
}


def _comparable(value):
    """Numbers compare as numbers (a JSON float against an Integer parameter, or a numeric
    string from Std:Join); everything else as is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def evaluate_condition(condition: Mapping, ctx: Context) -> tuple[bool, str]:
    """(outcome, a readable account such as ``0.953 >= 0.9``)."""
    kind = condition.get("Type")
    if kind in _COMPARISONS:
        symbol, compare = _COMPARISONS[kind]
        left = evaluate(condition.get("LeftValue"), ctx)
        right = evaluate(condition.get("RightValue"), ctx)
        a, b = _comparable(left), _comparable(right)
        try:
            outcome = bool(compare(a, b))
        except TypeError:
            raise ExpressionError(f"{kind}: cannot compare {left!r} with {right!r}") from None
        return outcome, f"{to_string(left)} {symbol} {to_string(right)}"
    if kind == "In":
        query = evaluate(condition.get("QueryValue"), ctx)
        values = evaluate(condition.get("Values", []), ctx)
        outcome = _comparable(query) in [_comparable(v) for v in values]
        return outcome, f"{to_string(query)} in {[to_string(v) for v in values]}"
    if kind == "Not":
        inner = condition.get("Condition", condition.get("Expression"))
        outcome, text = evaluate_condition(inner, ctx)
        return not outcome, f"not ({text})"
    if kind == "Or":
        results = [evaluate_condition(c, ctx) for c in condition.get("Conditions", [])]
        return any(r for r, _ in results), " or ".join(f"({t})" for _, t in results)
    raise ExpressionError(f"condition type {kind!r} is not supported")


def evaluate_conditions(conditions: list, ctx: Context) -> tuple[bool, str]:
    """A ConditionStep's list: all must hold (SageMaker ANDs them). A test of whether a
    parameter was given (``Parameters.X == ""``, or its ``Not``) reads as the fact, ``no X
    given`` or ``X given``, not as ``not ( == ) is false``."""
    results = [evaluate_condition(c, ctx) for c in conditions]
    accounts = []
    for condition, (outcome, text) in zip(conditions, results, strict=True):
        given = _parameter_given(condition, ctx)
        accounts.append(given if given is not None else f"{text} is {str(outcome).lower()}")
    return all(r for r, _ in results), " and ".join(accounts)


def _parameter_given(condition: Mapping, ctx: Context) -> str | None:
    """``no X given`` / ``X given`` for ``Equals(Parameters.X, "")`` (either side, under any
    number of ``Not``); None for any other condition."""
    while condition.get("Type") == "Not":
        condition = condition.get("Condition", condition.get("Expression")) or {}
    if condition.get("Type") != "Equals":
        return None
    sides = [condition.get("LeftValue"), condition.get("RightValue")]
    names = [n for side in sides if isinstance(side, Mapping) and set(side) == {"Get"}
             for n in parameter_references(side)]
    if len(names) != 1 or "" not in sides:
        return None
    return f"no {names[0]} given" if to_string(evaluate({"Get": f"Parameters.{names[0]}"}, ctx)) == "" \
        else f"{names[0]} given"


# --- Steps and their order -------------------------------------------------------------------
@dataclass(frozen=True)
class StepNode:
    name: str
    type: str
    body: Mapping  # the step as it appears in the definition
    depends_on: tuple[str, ...]
    # (condition step, True for IfSteps / False for ElseSteps), or None for top-level steps
    branch: tuple[str, bool] | None = None


def _get_paths(expr) -> Iterator[str]:
    """Every ``Get`` path an expression reads, however deeply nested (Std:Join, JsonGet)."""
    if isinstance(expr, list):
        for item in expr:
            yield from _get_paths(item)
    elif isinstance(expr, dict):
        for key, value in expr.items():
            if key == "Get" and isinstance(value, str):
                yield value
            else:
                yield from _get_paths(value)


def step_references(expr) -> Iterator[str]:
    """Names of the steps an expression reads (``Get Steps.X...`` and property files)."""
    for path in _get_paths(expr):
        if path.startswith("Steps."):
            yield path.split(".")[1]


def parameter_references(expr) -> Iterator[str]:
    """Names of the parameters an expression reads (``Get Parameters.X``); text that merely
    contains "Parameters." is not one."""
    for path in _get_paths(expr):
        if path.startswith("Parameters."):
            yield path.split(".", 1)[1]


def _walk(steps: list, branch, found: list) -> None:
    for step in steps:
        found.append((step, branch))
        if step.get("Type") == STEP_CONDITION:
            args = step.get("Arguments", {})
            _walk(args.get("IfSteps", []), (step["Name"], True), found)
            _walk(args.get("ElseSteps", []), (step["Name"], False), found)


def _data_of(step: Mapping):
    """The parts of a step whose references make it wait (not its branches' bodies)."""
    args = step.get("Arguments", {})
    if step.get("Type") == STEP_CONDITION:
        return args.get("Conditions", [])
    return args


def plan(definition: Mapping, allow_unsupported: bool = False) -> list[StepNode]:
    """Every step (branches included), checked and in an order that respects dependencies.
    Step types the runner cannot execute are refused unless ``allow_unsupported`` (the
    runner then decides, see ``stubs.py``)."""
    found: list = []
    _walk(definition.get("Steps", []), None, found)
    names = [step.get("Name") for step, _ in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DefinitionError(f"step name(s) used twice: {', '.join(duplicates)}")
    unsupported = [(s["Name"], s.get("Type")) for s, _ in found if s.get("Type") not in SUPPORTED_STEP_TYPES]
    if unsupported and not allow_unsupported:
        listed = ", ".join(f"{n} (Type {t})" for n, t in unsupported)
        raise DefinitionError(
            f"the local runner cannot run step {listed}; it runs these step types: "
            f"{', '.join(SUPPORTED_STEP_TYPES)}"
        )
    nodes = []
    for step, branch in found:
        deps = list(dict.fromkeys([*step_references(_data_of(step)), *step.get("DependsOn", [])]))
        if branch is not None and branch[0] not in deps:
            deps.append(branch[0])
        missing = [d for d in deps if d not in names]
        if missing:
            raise DefinitionError(f"step {step['Name']} refers to unknown step(s): {', '.join(missing)}")
        nodes.append(StepNode(step["Name"], step["Type"], step, tuple(deps), branch))
    return _topological(nodes)


def _topological(nodes: list[StepNode]) -> list[StepNode]:
    ordered: list[StepNode] = []
    done: set[str] = set()
    pending = list(nodes)
    while pending:
        ready = next((n for n in pending if set(n.depends_on) <= done), None)
        if ready is None:
            cycle = ", ".join(n.name for n in pending)
            raise DefinitionError(f"steps depend on each other in a cycle: {cycle}")
        ordered.append(ready)
        done.add(ready.name)
        pending.remove(ready)
    return ordered


def property_files_of(nodes: list[StepNode]) -> dict[str, list]:
    return {n.name: list(n.body.get("PropertyFiles", [])) for n in nodes}
