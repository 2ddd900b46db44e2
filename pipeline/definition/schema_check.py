"""Structural check of a definition against AWS's published pipeline-definition JSON schema.

The schema (``schemas/pipeline-definition.schema.json``, from
aws-sagemaker-mlops/sagemaker-model-building-pipeline-definition-JSON-schema @b4012b0,
Apache-2.0) is older than what SDK 2.257 emits, so it is read in a relaxed way:
(a) ``additionalProperties: false`` is dropped (newer fields such as PropertyFiles,
ModelApprovalStatus or ProfilerConfig are unknown to it), and (b) every ``*ArgumentValue``
may also be a one-key expression object (Get, Std:Join, Std:JsonGet, Std:Select), and
(c) a retry policy's ``ExceptionType`` may be a list of the schema's allowed values (the
schema says one string; the SageMaker API reference and the SDK use a list), (d) a condition's
branches may hold any step a pipeline may (the schema lists five types; SageMaker's own
examples put CreateModel, Transform and nested Condition steps there), (e) a condition may
be ``Not`` (``ConditionNot``: the SDK emits it, the schema predates it), and (f) a container's
``ModelDataUrl`` may be an expression (the training step's artifact), as its other fields
may, and (g) a tuning step's training definition may give its instances as
``HyperParameterTuningResourceConfig`` instead of ``ResourceConfig`` (the API took it later;
the SDK's ``HyperparameterTuner`` writes it). That still
rejects a wrong Version, an unknown step Type, a step without Name or Arguments, a parameter
without a Name or of an unknown Type.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

import jsonschema

from pipeline.errors import UserError

SCHEMA_PATH = Path(__file__).parent / "schemas" / "pipeline-definition.schema.json"
EXPRESSION_KEYS = ("Get", "Std:Join", "Std:JsonGet", "Std:Select")

_EXPRESSION = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": 1,
    "anyOf": [{"required": [key]} for key in EXPRESSION_KEYS],
}


class SchemaError(UserError, ValueError):
    """The definition does not have the structure SageMaker accepts."""


def _relax(node):
    if isinstance(node, dict):
        node = {k: _relax(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    elif isinstance(node, list):
        node = [_relax(v) for v in node]
    return node


@lru_cache(maxsize=1)
def relaxed_schema() -> dict:
    schema = _relax(json.loads(SCHEMA_PATH.read_text()))
    definitions = schema["definitions"]
    for name in [n for n in definitions if n.endswith("ArgumentValue")]:
        original = copy.deepcopy(definitions[name])
        # anyOf, not oneOf: a Get object matches both the original GetFunction and _EXPRESSION.
        definitions[name] = {"anyOf": [original, _EXPRESSION]}
    _any_step_in_branches(schema)
    exception_type = definitions["RetryPolicy"]["properties"]["ExceptionType"]
    definitions["RetryPolicy"]["properties"]["ExceptionType"] = {
        "anyOf": [exception_type, {"type": "array", "minItems": 1, "items": exception_type}]
    }
    return schema


def _any_step_in_branches(schema: dict) -> None:
    """(d), (e) and (f) of the module's docstring."""
    definitions = schema["definitions"]
    arguments = definitions["ConditionStep"]["properties"]["Arguments"]["properties"]
    for branch in ("IfSteps", "ElseSteps"):
        arguments[branch]["items"] = copy.deepcopy(schema["properties"]["Steps"]["items"])
    conditions = arguments["Conditions"]["items"]["oneOf"]
    definitions["NotCondition"] = {
        "type": "object",
        "properties": {"Type": {"enum": ["Not"]}, "Condition": {"anyOf": copy.deepcopy(conditions)}},
        "required": ["Type", "Condition"],
    }
    conditions.append({"$ref": "#/definitions/NotCondition"})
    container = definitions["ContainerDefinition"]["properties"]
    container["ModelDataUrl"] = {"anyOf": [container["ModelDataUrl"], _EXPRESSION]}
    tuned = definitions["HyperParameterTrainingJobDefinition"]
    tuned["required"] = [r for r in tuned["required"] if r != "ResourceConfig"]
    tuned["anyOf"] = [{"required": ["ResourceConfig"]}, {"required": ["HyperParameterTuningResourceConfig"]}]


def check_definition(definition: dict | str) -> None:
    """Raise ``SchemaError`` naming the first offending place; return None when it passes."""
    document = json.loads(definition) if isinstance(definition, str) else definition
    validator = jsonschema.Draft7Validator(relaxed_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        # A step matching none of the step shapes says so about the whole step; the most
        # relevant sub-error names the field that is wrong.
        while first.context:
            first = _relevant(first)
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        step = _step_name(document, list(first.absolute_path))
        raise SchemaError(
            f"pipeline definition fails the schema check at {where}"
            + (f" (step {step!r})" if step else "")
            + f": {first.message[:200]}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
        )


def _relevant(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """Of a oneOf/anyOf failure, the sub-error from the branch meant for this instance: for a
    step, the branch whose ``Type`` matches (else the error is the unknown Type itself)."""
    branches: dict[int, list] = {}
    for sub in error.context:
        branches.setdefault(sub.schema_path[0], []).append(sub)
    instance = error.instance
    if isinstance(instance, dict) and "Type" in instance:
        matching = [
            errs for errs in branches.values()
            if not any(list(e.relative_path) == ["Type"] for e in errs)
        ]
        if not matching:
            return jsonschema.ValidationError(
                f"unknown Type {instance['Type']!r}", path=error.absolute_path
            )
        return sorted(matching[0], key=lambda e: list(map(str, e.absolute_path)))[0]
    return jsonschema.exceptions.best_match(error.context)


def _step_name(document: dict, path: list) -> str | None:
    if len(path) >= 2 and path[0] == "Steps" and isinstance(path[1], int):
        steps = document.get("Steps") or []
        if path[1] < len(steps) and isinstance(steps[path[1]], dict):
            return steps[path[1]].get("Name")
    return None
